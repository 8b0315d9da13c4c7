//! LOLWUT's canvas: pixels of a few colours, lines (Bresenham) and rotated squares, as
//! Redis's `lolwut.c` draws them.

pub(super) struct Canvas {
    pub width: i64,
    pub height: i64,
    pixels: Vec<u8>,
}

impl Canvas {
    pub fn new(width: i64, height: i64, color: u8) -> Canvas {
        Canvas {
            width,
            height,
            pixels: vec![color; (width * height) as usize],
        }
    }

    /// Out of the canvas: ignored.
    pub fn set(&mut self, x: i64, y: i64, color: u8) {
        if (0..self.width).contains(&x) && (0..self.height).contains(&y) {
            self.pixels[(x + y * self.width) as usize] = color;
        }
    }

    /// Out of the canvas: 0.
    pub fn get(&self, x: i64, y: i64) -> u8 {
        if (0..self.width).contains(&x) && (0..self.height).contains(&y) {
            self.pixels[(x + y * self.width) as usize]
        } else {
            0
        }
    }

    pub fn line(&mut self, mut x1: i64, mut y1: i64, x2: i64, y2: i64, color: u8) {
        let (dx, dy) = ((x2 - x1).abs(), (y2 - y1).abs());
        let sx = if x1 < x2 { 1 } else { -1 };
        let sy = if y1 < y2 { 1 } else { -1 };
        let mut err = dx - dy;
        loop {
            self.set(x1, y1, color);
            if x1 == x2 && y1 == y2 {
                break;
            }
            let e2 = err * 2;
            if e2 > -dy {
                err -= dy;
                x1 += sx;
            }
            if e2 < dx {
                err += dx;
                y1 += sy;
            }
        }
    }

    /// A square centred on `x, y`, `size` wide, rotated by `angle` radians.
    pub fn square(&mut self, x: i64, y: i64, size: f32, angle: f32, color: u8) {
        let size = (size / std::f32::consts::SQRT_2).round();
        let mut k = std::f32::consts::FRAC_PI_4 + angle;
        let mut points = [(0i64, 0i64); 4];
        for point in &mut points {
            *point = (
                (k.sin() * size + x as f32).round() as i64,
                (k.cos() * size + y as f32).round() as i64,
            );
            k += std::f32::consts::FRAC_PI_2;
        }
        for j in 0..4 {
            let (from, to) = (points[j], points[(j + 1) % 4]);
            self.line(from.0, from.1, to.0, to.1, color);
        }
    }
}
