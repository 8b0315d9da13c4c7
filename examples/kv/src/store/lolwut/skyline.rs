//! LOLWUT 6: a skyline of random skyscrapers (two grey layers, then black ones with lit
//! windows), one terminal cell per pixel in ANSI colours.

use super::canvas::Canvas;

/// `[columns, rows, _]`, clamped as Redis clamps them.
pub(super) fn render(args: &[i64; 3]) -> String {
    let cols = args[0].clamp(1, 1000);
    let rows = args[1].clamp(1, 1000);
    let mut canvas = Canvas::new(cols, rows, 3);
    skyline(&mut canvas);
    let mut text = String::new();
    for y in 0..canvas.height {
        for x in 0..canvas.width {
            let escape = match canvas.get(x, y) {
                1 => "0;90;100m",
                2 => "0;37;47m",
                3 => "0;97;107m",
                _ => "0;30;40m",
            };
            text.push_str(&format!("\x1b[{escape} \x1b[0m"));
        }
        if y != canvas.height - 1 {
            text.push('\n');
        }
    }
    text.push_str(
        "\nDedicated to the 8 bit game developers of past and present.\n\
         Original 8 bit image from Plaguemon by hikikomori. Redis ver. ",
    );
    text.push_str(super::VERSION);
    text.push('\n');
    text
}

struct Skyscraper {
    xoff: i64,
    width: i64,
    height: i64,
    windows: bool,
    color: u8,
}

fn rand(below: i64) -> i64 {
    fastrand::i64(0..below.max(1))
}

fn skyline(canvas: &mut Canvas) {
    let h = canvas.height;
    // The lighter grey first, so it stays in the background.
    for color in [2u8, 1] {
        let mut offset = -10;
        while offset < canvas.width {
            offset += rand(8);
            let width = 10 + rand(9);
            let height = if color == 2 {
                h / 2 + rand(h) / 2
            } else {
                h / 2 + rand(h) / 3
            };
            let tower = Skyscraper {
                xoff: offset,
                width,
                height,
                windows: false,
                color,
            };
            draw(canvas, &tower);
            offset += if color == 2 { width / 2 } else { width + 1 };
        }
    }
    let mut offset = -10;
    while offset < canvas.width {
        offset += rand(8);
        let mut width = 5 + rand(14);
        if width % 4 != 0 {
            width += width % 3;
        }
        let tower = Skyscraper {
            xoff: offset,
            width,
            height: h / 3 + rand(h) / 2,
            windows: true,
            color: 0,
        };
        draw(canvas, &tower);
        offset += width + 5;
    }
}

fn draw(canvas: &mut Canvas, tower: &Skyscraper) {
    let start_y = canvas.height - 1;
    let end_y = start_y - tower.height + 1;
    let (left, right) = (tower.xoff, tower.xoff + tower.width);
    for y in (end_y..=start_y).rev() {
        for x in left..right {
            // Rounded roof corners.
            if y == end_y && (x <= left + 1 || x >= right - 2) {
                continue;
            }
            let mut color = tower.color;
            if tower.windows && x > left + 1 && x < right - 2 && y > end_y + 1 && y < start_y - 1 {
                let (relx, rely) = (x - (left + 1), y - (end_y + 1));
                // Windows two pixels wide, one tall (terminal cells are not square).
                if (relx / 2) % 2 != 0 && rely % 2 != 0 {
                    color = loop {
                        let lit = 1 + fastrand::u8(0..2);
                        if lit != tower.color {
                            break lit;
                        }
                    };
                    if relx % 2 != 0 {
                        color = canvas.get(x - 1, y);
                    }
                }
            }
            canvas.set(x, y, color);
        }
    }
}
