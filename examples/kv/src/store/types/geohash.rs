//! Geohash math, a port of Redis 7.0's geohash.c and geohash_helper.c operation for operation
//! (same constants, same order of floating-point steps), so the scores GEOADD stores and the
//! positions, distances and hashes the geo commands answer are bit-identical to
//! redis-server's. Sans-I/O: numbers in, numbers out.
//!
//! A position is stored as the 52-bit interleaving of its latitude and longitude, each
//! quantised to 26 bits over Redis's ranges (longitude -180..180, latitude
//! -85.05112878..85.05112878: the Web Mercator limits).

/// Redis's `GEO_STEP_MAX`: 26 bits per coordinate.
pub const STEP_MAX: u8 = 26;
pub const LAT_MIN: f64 = -85.05112878;
pub const LAT_MAX: f64 = 85.05112878;
pub const LONG_MIN: f64 = -180.0;
pub const LONG_MAX: f64 = 180.0;

const D_R: f64 = std::f64::consts::PI / 180.0;
/// Earth's quadratic mean radius for WGS-84, as Redis has it.
const EARTH_RADIUS_IN_METERS: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;

/// A coordinate range (`GeoHashRange`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    pub min: f64,
    pub max: f64,
}

/// Redis's ranges for stored positions.
pub const LONG_RANGE: Range = Range {
    min: LONG_MIN,
    max: LONG_MAX,
};
pub const LAT_RANGE: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};

/// A geohash: `step` bits per coordinate, interleaved (`GeoHashBits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Hash {
    pub bits: u64,
    pub step: u8,
}

impl Hash {
    pub fn is_zero(self) -> bool {
        self.bits == 0 && self.step == 0
    }
}

/// The cell a hash stands for (`GeoHashArea`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Area {
    pub hash: Hash,
    pub longitude: Range,
    pub latitude: Range,
}

fn interleave64(xlo: u32, ylo: u32) -> u64 {
    const B: [u64; 5] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
    ];
    const S: [u32; 5] = [1, 2, 4, 8, 16];
    let (mut x, mut y) = (u64::from(xlo), u64::from(ylo));
    for i in (0..5).rev() {
        x = (x | (x << S[i])) & B[i];
        y = (y | (y << S[i])) & B[i];
    }
    x | (y << 1)
}

fn deinterleave64(interleaved: u64) -> u64 {
    const B: [u64; 6] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
        0x00000000FFFFFFFF,
    ];
    const S: [u32; 6] = [0, 1, 2, 4, 8, 16];
    let (mut x, mut y) = (interleaved, interleaved >> 1);
    for i in 0..6 {
        x = (x | (x >> S[i])) & B[i];
        y = (y | (y >> S[i])) & B[i];
    }
    x | (y << 32)
}

/// C's conversion of a double to `uint32_t` on x86-64 for the values `geohashEncode` makes
/// (0 up to 2^step): truncation.
fn to_u32(value: f64) -> u32 {
    value as u64 as u32
}

/// `geohashEncode`: `None` outside the ranges (or Redis's limits).
pub fn encode(
    long_range: Range,
    lat_range: Range,
    longitude: f64,
    latitude: f64,
    step: u8,
) -> Option<Hash> {
    if step > 32 || step == 0 {
        return None;
    }
    if !(LONG_MIN..=LONG_MAX).contains(&longitude) || !(LAT_MIN..=LAT_MAX).contains(&latitude) {
        return None;
    }
    if latitude < lat_range.min
        || latitude > lat_range.max
        || longitude < long_range.min
        || longitude > long_range.max
    {
        return None;
    }
    let mut lat_offset = (latitude - lat_range.min) / (lat_range.max - lat_range.min);
    let mut long_offset = (longitude - long_range.min) / (long_range.max - long_range.min);
    lat_offset *= (1u64 << step) as f64;
    long_offset *= (1u64 << step) as f64;
    Some(Hash {
        bits: interleave64(to_u32(lat_offset), to_u32(long_offset)),
        step,
    })
}

/// `geohashEncodeWGS84`.
pub fn encode_wgs84(longitude: f64, latitude: f64, step: u8) -> Option<Hash> {
    encode(LONG_RANGE, LAT_RANGE, longitude, latitude, step)
}

/// `geohashDecode`.
pub fn decode(long_range: Range, lat_range: Range, hash: Hash) -> Option<Area> {
    if hash.is_zero() {
        return None;
    }
    let step = hash.step;
    let hash_sep = deinterleave64(hash.bits);
    let lat_scale = lat_range.max - lat_range.min;
    let long_scale = long_range.max - long_range.min;
    let ilato = hash_sep as u32;
    let ilono = (hash_sep >> 32) as u32;
    let cells = (1u64 << step) as f64;
    Some(Area {
        hash,
        latitude: Range {
            min: lat_range.min + (f64::from(ilato) * 1.0 / cells) * lat_scale,
            max: lat_range.min + (f64::from(ilato.wrapping_add(1)) * 1.0 / cells) * lat_scale,
        },
        longitude: Range {
            min: long_range.min + (f64::from(ilono) * 1.0 / cells) * long_scale,
            max: long_range.min + (f64::from(ilono.wrapping_add(1)) * 1.0 / cells) * long_scale,
        },
    })
}

/// `geohashDecodeAreaToLongLat`: the cell's centre, clamped to the limits.
pub fn area_center(area: &Area) -> (f64, f64) {
    let longitude = ((area.longitude.min + area.longitude.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let latitude = ((area.latitude.min + area.latitude.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (longitude, latitude)
}

/// A sorted set score as geo.c's `decodeGeohash` reads it: `(uint64_t)score` (what x86-64
/// makes of a negative or huge score, so a non-geo set decodes as redis-server's does),
/// then the position at the centre of its 26-bit cell.
pub fn decode_score(score: f64) -> Option<(f64, f64)> {
    let bits = if score < 9_223_372_036_854_775_808.0 {
        // cvttsd2si: out of range (and NaN) gives i64::MIN, as `as` saturates to below.
        if score.is_nan() {
            i64::MIN as u64
        } else {
            score as i64 as u64
        }
    } else {
        let high = score - 9_223_372_036_854_775_808.0;
        let low = if high < 9_223_372_036_854_775_808.0 {
            high as i64 as u64
        } else {
            i64::MIN as u64
        };
        low ^ (1 << 63)
    };
    let area = decode(
        LONG_RANGE,
        LAT_RANGE,
        Hash {
            bits,
            step: STEP_MAX,
        },
    )?;
    Some(area_center(&area))
}

/// The score GEOADD stores for a position (`geohashAlign52Bits` of the 26-step hash).
pub fn score_of(longitude: f64, latitude: f64) -> Option<u64> {
    encode_wgs84(longitude, latitude, STEP_MAX).map(align52)
}

/// `geohashAlign52Bits`.
pub fn align52(hash: Hash) -> u64 {
    hash.bits << (52 - u32::from(hash.step) * 2)
}

fn move_x(hash: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let mut x = hash.bits & 0xaaaaaaaaaaaaaaaa;
    let y = hash.bits & 0x5555555555555555;
    let zz = 0x5555555555555555u64 >> (64 - u32::from(hash.step) * 2);
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaaaaaaaaaaaaaau64 >> (64 - u32::from(hash.step) * 2);
    hash.bits = x | y;
}

fn move_y(hash: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let x = hash.bits & 0xaaaaaaaaaaaaaaaa;
    let mut y = hash.bits & 0x5555555555555555;
    let zz = 0xaaaaaaaaaaaaaaaau64 >> (64 - u32::from(hash.step) * 2);
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555555555555555u64 >> (64 - u32::from(hash.step) * 2);
    hash.bits = x | y;
}

/// The eight cells around one (`GeoHashNeighbors`); a zeroed one is skipped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Neighbors {
    pub north: Hash,
    pub east: Hash,
    pub west: Hash,
    pub south: Hash,
    pub north_east: Hash,
    pub south_east: Hash,
    pub north_west: Hash,
    pub south_west: Hash,
}

fn moved(hash: Hash, dx: i8, dy: i8) -> Hash {
    let mut hash = hash;
    move_x(&mut hash, dx);
    move_y(&mut hash, dy);
    hash
}

/// `geohashNeighbors`.
pub fn neighbors(hash: Hash) -> Neighbors {
    Neighbors {
        east: moved(hash, 1, 0),
        west: moved(hash, -1, 0),
        south: moved(hash, 0, -1),
        north: moved(hash, 0, 1),
        north_west: moved(hash, -1, 1),
        north_east: moved(hash, 1, 1),
        south_east: moved(hash, 1, -1),
        south_west: moved(hash, -1, -1),
    }
}

fn deg_rad(angle: f64) -> f64 {
    angle * D_R
}

fn rad_deg(angle: f64) -> f64 {
    angle / D_R
}

/// `geohashEstimateStepsByRadius`.
pub fn estimate_steps_by_radius(range_meters: f64, lat: f64) -> u8 {
    if range_meters == 0.0 {
        return 26;
    }
    let mut range_meters = range_meters;
    let mut step: i32 = 1;
    while range_meters < MERCATOR_MAX {
        range_meters *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// What a search covers (`GeoShape`): a circle or an axis-aligned box around a centre, its
/// sizes in the unit `conversion` meters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    Radius(f64),
    Box { width: f64, height: f64 },
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Search {
    pub longitude: f64,
    pub latitude: f64,
    pub shape: Shape,
    /// Meters per unit.
    pub conversion: f64,
}

impl Search {
    /// `geohashBoundingBox`: [min lon, min lat, max lon, max lat].
    pub fn bounding_box(&self) -> [f64; 4] {
        let (longitude, latitude) = (self.longitude, self.latitude);
        let (height, width) = match self.shape {
            Shape::Radius(r) => (self.conversion * r, self.conversion * r),
            Shape::Box { width, height } => (
                self.conversion * (height / 2.0),
                self.conversion * (width / 2.0),
            ),
        };
        let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
        let long_delta_top =
            rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude + lat_delta).cos());
        let long_delta_bottom =
            rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude - lat_delta).cos());
        let southern = latitude < 0.0;
        [
            if southern {
                longitude - long_delta_bottom
            } else {
                longitude - long_delta_top
            },
            latitude - lat_delta,
            if southern {
                longitude + long_delta_bottom
            } else {
                longitude + long_delta_top
            },
            latitude + lat_delta,
        ]
    }

    /// `geohashCalculateAreasByShapeWGS84`: the cells to scan, the centre's first and then
    /// north, south, east, west, north-east, north-west, south-east, south-west (zeroed ones
    /// are not needed), in the order `membersOfAllNeighbors` scans them.
    pub fn cells(&self) -> [Hash; 9] {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounding_box();
        let (longitude, latitude) = (self.longitude, self.latitude);
        let radius_meters = match self.shape {
            Shape::Radius(r) => r,
            Shape::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        } * self.conversion;
        let mut steps = estimate_steps_by_radius(radius_meters, latitude);
        let cell = |steps: u8| {
            let hash = encode(LONG_RANGE, LAT_RANGE, longitude, latitude, steps).unwrap_or(Hash {
                bits: 0,
                step: steps,
            });
            let area = decode(LONG_RANGE, LAT_RANGE, hash);
            (hash, neighbors(hash), area)
        };
        let (mut hash, mut near, mut area) = cell(steps);
        // Too coarse a step can leave the search area past a neighbouring cell.
        let decode_or_zero = |h: Hash| decode(LONG_RANGE, LAT_RANGE, h);
        let mut decrease = false;
        if let Some(north) = decode_or_zero(near.north) {
            decrease |= north.latitude.max < max_lat;
        }
        if let Some(south) = decode_or_zero(near.south) {
            decrease |= south.latitude.min > min_lat;
        }
        if let Some(east) = decode_or_zero(near.east) {
            decrease |= east.longitude.max < max_lon;
        }
        if let Some(west) = decode_or_zero(near.west) {
            decrease |= west.longitude.min > min_lon;
        }
        if steps > 1 && decrease {
            steps -= 1;
            (hash, near, area) = cell(steps);
        }
        if steps >= 2 {
            if let Some(area) = area {
                let zero = Hash::default();
                if area.latitude.min < min_lat {
                    (near.south, near.south_west, near.south_east) = (zero, zero, zero);
                }
                if area.latitude.max > max_lat {
                    (near.north, near.north_east, near.north_west) = (zero, zero, zero);
                }
                if area.longitude.min < min_lon {
                    (near.west, near.south_west, near.north_west) = (zero, zero, zero);
                }
                if area.longitude.max > max_lon {
                    (near.east, near.south_east, near.north_east) = (zero, zero, zero);
                }
            }
        }
        [
            hash,
            near.north,
            near.south,
            near.east,
            near.west,
            near.north_east,
            near.north_west,
            near.south_east,
            near.south_west,
        ]
    }

    /// `geoWithinShape` after decoding: the distance from the centre (meters) when the
    /// point is inside.
    pub fn contains(&self, longitude: f64, latitude: f64) -> Option<f64> {
        match self.shape {
            Shape::Radius(r) => {
                let distance = distance(self.longitude, self.latitude, longitude, latitude);
                (distance <= r * self.conversion).then_some(distance)
            }
            Shape::Box { width, height } => {
                let (width_m, height_m) = (width * self.conversion, height * self.conversion);
                if lat_distance(latitude, self.latitude) > height_m / 2.0 {
                    return None;
                }
                if distance(longitude, latitude, self.longitude, latitude) > width_m / 2.0 {
                    return None;
                }
                Some(distance(self.longitude, self.latitude, longitude, latitude))
            }
        }
    }
}

/// `scoresOfGeoHashBox`: the scores [min, max) of the points in a cell.
pub fn score_range(hash: Hash) -> (u64, u64) {
    let min = align52(hash);
    let max = align52(Hash {
        bits: hash.bits.wrapping_add(1),
        step: hash.step,
    });
    (min, max)
}

/// `geohashGetLatDistance`.
pub fn lat_distance(lat1d: f64, lat2d: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (deg_rad(lat2d) - deg_rad(lat1d)).abs()
}

/// `geohashGetDistance`: the haversine great-circle distance in meters.
pub fn distance(lon1d: f64, lat1d: f64, lon2d: f64, lat2d: f64) -> f64 {
    let lon1r = deg_rad(lon1d);
    let lon2r = deg_rad(lon2d);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1d, lat2d);
    }
    let lat1r = deg_rad(lat1d);
    let lat2r = deg_rad(lat2d);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
}

/// GEOHASH's 11-character standard geohash of a stored score (re-encoded over the standard
/// latitude range -90..90); `None` when the score does not decode.
pub fn standard_geohash(score: f64) -> Option<[u8; 11]> {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (longitude, latitude) = decode_score(score)?;
    let hash = encode(
        Range {
            min: -180.0,
            max: 180.0,
        },
        Range {
            min: -90.0,
            max: 90.0,
        },
        longitude,
        latitude,
        26,
    )
    .unwrap_or(Hash { bits: 0, step: 26 });
    let mut out = [b'0'; 11];
    for (i, slot) in out.iter_mut().enumerate().take(10) {
        let index = (hash.bits >> (52 - (i + 1) * 5)) & 0x1f;
        *slot = ALPHABET[index as usize];
    }
    Some(out)
}

/// Redis's `addReplyDoubleDistance` (`fixedpoint_d2string` with 4 decimals): the value
/// rounded (`llrint`, ties to even) to 1/10000, printed with exactly 4 decimals.
pub fn format_distance(value: f64) -> String {
    if value == 0.0 {
        return "0.0000".into();
    }
    let scaled = (value * 10000.0).round_ties_even();
    let scaled = if scaled >= 9.223_372_036_854_776e18 || scaled.is_nan() {
        i64::MIN
    } else {
        scaled as i64
    };
    let negative = scaled < 0;
    let magnitude = scaled.unsigned_abs();
    format!(
        "{}{}.{:04}",
        if negative { "-" } else { "" },
        magnitude / 10000,
        magnitude % 10000
    )
}

/// Redis's `addReplyHumanLongDouble` text (`%.17Lf` without trailing zeros): coordinates.
pub fn format_human(value: f64) -> String {
    if value.is_infinite() {
        return if value > 0.0 { "inf" } else { "-inf" }.into();
    }
    let text = format!("{value:.17}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".into()
    } else {
        text.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scores, positions and hashes from redis-server 7.0.15 (GEOADD, ZSCORE, GEOPOS,
    /// GEOHASH, GEODIST).
    #[test]
    fn matches_redis_server() {
        // GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania
        let palermo = score_of(13.361389, 38.115556).unwrap();
        let catania = score_of(15.087269, 37.502669).unwrap();
        assert_eq!(palermo, 3479099956230698);
        assert_eq!(catania, 3479447370796909);
        let (lon, lat) = decode_score(palermo as f64).unwrap();
        assert_eq!(format_human(lon), "13.36138933897018433");
        assert_eq!(format_human(lat), "38.11555639549629859");
        let (lon2, lat2) = decode_score(catania as f64).unwrap();
        assert_eq!(format_human(lon2), "15.08726745843887329");
        assert_eq!(format_human(lat2), "37.50266842333162032");
        assert_eq!(
            format_distance(distance(lon, lat, lon2, lat2)),
            "166274.1516"
        );
        assert_eq!(
            format_distance(distance(lon, lat, lon2, lat2) / 1000.0),
            "166.2742"
        );
        assert_eq!(&standard_geohash(palermo as f64).unwrap(), b"sqc8b49rny0");
        assert_eq!(&standard_geohash(catania as f64).unwrap(), b"sqdtr74hyu0");
        // Scores GEOADD never writes decode as x86-64 converts them: ZADD neg -5 a 1e300 b.
        let (lon, lat) = decode_score(-5.0).unwrap();
        assert_eq!(
            (format_human(lon), format_human(lat)),
            ("180".into(), "85.0511287799999991".into())
        );
        let (lon, lat) = decode_score(1e300).unwrap();
        assert_eq!(
            (format_human(lon), format_human(lat)),
            (
                "-179.99999731779098511".into(),
                "-85.05112751263942528".into()
            )
        );
        assert_eq!(&standard_geohash(-5.0).unwrap(), b"bp05b5048p0");
        assert_eq!(&standard_geohash(1e300).unwrap(), b"00bh0hbj200");
    }

    #[test]
    fn limits_and_interleaving() {
        assert_eq!(score_of(180.1, 0.0), None);
        assert_eq!(score_of(0.0, 85.1), None);
        assert!(score_of(-180.0, -85.05112878).is_some());
        for (x, y) in [
            (0u32, 0u32),
            (1, 2),
            (0x3ff_ffff, 0x155_5555),
            (u32::MAX, 7),
        ] {
            let bits = interleave64(x, y);
            let both = deinterleave64(bits);
            assert_eq!((both as u32, (both >> 32) as u32), (x, y));
        }
    }

    #[test]
    fn distances_print_like_fixedpoint_d2string() {
        assert_eq!(format_distance(0.0), "0.0000");
        assert_eq!(format_distance(0.00004), "0.0000");
        assert_eq!(format_distance(1.23456), "1.2346");
        assert_eq!(format_distance(-0.00004), "0.0000");
        assert_eq!(format_distance(1.5), "1.5000");
        assert_eq!(format_distance(-2.25), "-2.2500");
        assert_eq!(format_distance(0.7750), "0.7750");
    }

    #[test]
    fn human_doubles_trim_zeros() {
        assert_eq!(format_human(1.0), "1");
        assert_eq!(format_human(-0.0), "0");
        assert_eq!(format_human(0.5), "0.5");
    }

    #[test]
    fn neighbours_of_a_cell_touch_it() {
        let hash = encode_wgs84(13.361389, 38.115556, 10).unwrap();
        let here = decode(LONG_RANGE, LAT_RANGE, hash).unwrap();
        let near = neighbors(hash);
        let north = decode(LONG_RANGE, LAT_RANGE, near.north).unwrap();
        let east = decode(LONG_RANGE, LAT_RANGE, near.east).unwrap();
        assert_eq!(north.latitude.min, here.latitude.max);
        assert_eq!(north.longitude, here.longitude);
        assert_eq!(east.longitude.min, here.longitude.max);
        assert_eq!(east.latitude, here.latitude);
        assert_eq!(estimate_steps_by_radius(0.0, 0.0), 26);
        assert_eq!(estimate_steps_by_radius(200_000.0, 38.0), 6);
    }
}
