//! LOLWUT 5: Georg Nees's "Schotter" (1968), squares more and more disordered down the rows,
//! rendered with braille characters (2x4 pixels each).

use super::canvas::Canvas;

/// `[columns, squares per row, squares per column]`, clamped as Redis clamps them.
pub(super) fn render(args: &[i64; 3]) -> String {
    let cols = args[0].clamp(1, 1000);
    let per_row = args[1].clamp(1, 200);
    let per_col = args[2].clamp(1, 200);
    let canvas = draw(cols, per_row, per_col);
    let mut text = String::new();
    for y in (0..canvas.height).step_by(4) {
        for x in (0..canvas.width).step_by(2) {
            let dots = [
                (0, 0),
                (0, 1),
                (0, 2),
                (1, 0),
                (1, 1),
                (1, 2),
                (0, 3),
                (1, 3),
            ];
            let byte = dots
                .iter()
                .enumerate()
                .fold(0u32, |byte, (bit, &(dx, dy))| {
                    byte | (u32::from(canvas.get(x + dx, y + dy) != 0) << bit)
                });
            text.push(char::from_u32(0x2800 + byte).unwrap_or(' '));
        }
        if y != canvas.height - 1 {
            text.push('\n');
        }
    }
    text.push_str("\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. ");
    text.push_str(super::VERSION);
    text.push('\n');
    text
}

fn draw(cols: i64, per_row: i64, per_col: i64) -> Canvas {
    let width = cols * 2;
    let padding = if width > 4 { 2 } else { 0 };
    let side = (width - padding * 2) as f32 / per_row as f32;
    let height = (side * per_col as f32) as i64 + padding * 2;
    let mut canvas = Canvas::new(width, height, 0);
    for y in 0..per_col {
        for x in 0..per_row {
            let mut sx = (x as f32 * side + side / 2.0 + padding as f32) as i64;
            let mut sy = (y as f32 * side + side / 2.0 + padding as f32) as i64;
            let mut angle = 0.0;
            if y > 1 {
                let random = || {
                    let r = fastrand::f32() / per_col as f32 * y as f32;
                    if fastrand::bool() {
                        -r
                    } else {
                        r
                    }
                };
                let (r1, r2, r3) = (random(), random(), random());
                angle = r1;
                sx += (r2 * side / 3.0) as i64;
                sy += (r3 * side / 3.0) as i64;
            }
            canvas.square(sx, sy, side, angle, 1);
        }
    }
    canvas
}
