//! Geo commands (Redis 7.0's geo.c): positions live in sorted sets as geohash scores (see
//! `geohash.rs`). GEOADD is ZADD with the positions' scores (logged and notified as that
//! ZADD, as Redis propagates it); GEODIST, GEOHASH, GEOPOS read scores back; GEOSEARCH,
//! GEOSEARCHSTORE, GEORADIUS[_RO] and GEORADIUSBYMEMBER[_RO] share Redis's
//! `georadiusGeneric`: its argument order, errors and scan of the nine cells around the
//! centre.

use bytes::Bytes;

use super::args::{float, is, parse_float};
use super::geohash::{self, Search, Shape};
use super::zset::{text, zset_ref};
use super::Cx;
use crate::change::ChangeSink;
use crate::command::{CommandError, TypedOp as Op};
use crate::reply::Reply;
use crate::store::compact::CompactBytes;
use crate::store::value::{Score, Value, ValueType, ZSet};

const ZSET: ValueType = ValueType::ZSet;

/// `extractLongLatOrReply`: two doubles, inside Redis's limits.
fn long_lat(a: &[Bytes]) -> Result<(f64, f64), CommandError> {
    let (longitude, latitude) = (float(&a[0])?, float(&a[1])?);
    if !(geohash::LONG_MIN..=geohash::LONG_MAX).contains(&longitude)
        || !(geohash::LAT_MIN..=geohash::LAT_MAX).contains(&latitude)
    {
        return Err(CommandError::Text(format!(
            "ERR invalid longitude,latitude pair {longitude:.6},{latitude:.6}"
        )));
    }
    Ok((longitude, latitude))
}

/// `extractUnitOrReply`: meters per unit.
fn unit(arg: &[u8]) -> Result<f64, CommandError> {
    match () {
        _ if is(arg, "m") => Ok(1.0),
        _ if is(arg, "km") => Ok(1000.0),
        _ if is(arg, "ft") => Ok(0.3048),
        _ if is(arg, "mi") => Ok(1609.34),
        _ => Err(text(
            "ERR unsupported unit provided. please use M, KM, FT, MI",
        )),
    }
}

/// A double with the error Redis gives for it (`getDoubleFromObjectOrReply` with a message).
fn number(arg: &[u8], message: &str) -> Result<f64, CommandError> {
    parse_float(arg).ok_or_else(|| text(message))
}

/// `extractDistanceOrReply`: `radius unit`.
fn radius(a: &[Bytes]) -> Result<(f64, f64), CommandError> {
    let distance = number(&a[0], "ERR need numeric radius")?;
    if distance < 0.0 {
        return Err(text("ERR radius cannot be negative"));
    }
    Ok((distance, unit(&a[1])?))
}

/// `extractBoxOrReply`: `width height unit`.
fn bounding_box(a: &[Bytes]) -> Result<(f64, f64, f64), CommandError> {
    let width = number(&a[0], "ERR need numeric width")?;
    let height = number(&a[1], "ERR need numeric height")?;
    if height < 0.0 || width < 0.0 {
        return Err(text("ERR height or width cannot be negative"));
    }
    Ok((width, height, unit(&a[2])?))
}

/// A stored member's position (`longLatFromMember`).
fn member_position(zset: &ZSet, member: &[u8]) -> Option<(f64, f64)> {
    geohash::decode_score(*zset.scores.get(member)?)
}

#[derive(Clone, Copy, PartialEq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// A point found by a search (`geoPoint`).
struct Point {
    longitude: f64,
    latitude: f64,
    dist: f64,
    score: f64,
    member: Bytes,
}

/// What a search answers, once its arguments are read.
enum Outcome {
    Reply(Reply),
    /// Points to reply with (dist already in the unit).
    Points {
        points: Vec<Point>,
        with_dist: bool,
        with_hash: bool,
        with_coord: bool,
    },
    /// Points to store at `key` (empty: delete it), scores the distances with `dist`.
    Store {
        key: Bytes,
        points: Vec<Point>,
        dist: bool,
    },
}

/// The points of `zset` inside `search`, scanned as `membersOfAllNeighbors` does: each of
/// the nine cells once (a cell equal to the one scanned before it is skipped), by score, at
/// most `limit` points (0: all).
fn points_in(zset: &ZSet, search: &Search, limit: usize) -> Vec<Point> {
    let cells = search.cells();
    let mut found = Vec::new();
    let mut last_processed = 0;
    for (i, cell) in cells.iter().enumerate() {
        if cell.is_zero() {
            continue;
        }
        if last_processed != 0 && *cell == cells[last_processed] {
            continue;
        }
        if !found.is_empty() && limit != 0 && found.len() >= limit {
            break;
        }
        let (min, max) = geohash::score_range(*cell);
        let (min, max) = (min as f64, max as f64);
        let from = zset.order.partition_point(|(Score(s), _)| *s < min);
        for (Score(score), member) in zset.order.iter_from(from) {
            if *score >= max {
                break;
            }
            if let Some((longitude, latitude)) = geohash::decode_score(*score) {
                if let Some(dist) = search.contains(longitude, latitude) {
                    found.push(Point {
                        longitude,
                        latitude,
                        dist,
                        score: *score,
                        member: member.to_bytes(),
                    });
                }
            }
            if !found.is_empty() && limit != 0 && found.len() >= limit {
                break;
            }
        }
        last_processed = i;
    }
    found
}

/// Which form of `georadiusGeneric` runs.
#[derive(Clone, Copy)]
struct Form {
    /// GEORADIUS[_RO]: centre and radius are positional.
    coords: bool,
    /// GEORADIUSBYMEMBER[_RO]: centre member and radius are positional.
    member: bool,
    /// STORE / STOREDIST accepted (GEORADIUS, GEORADIUSBYMEMBER).
    store: bool,
    /// GEOSEARCH / GEOSEARCHSTORE options.
    search: bool,
    /// GEOSEARCHSTORE: the destination is `a[0]`.
    search_store: bool,
}

fn form(op: Op) -> Form {
    let none = Form {
        coords: false,
        member: false,
        store: false,
        search: false,
        search_store: false,
    };
    match op {
        Op::GeoRadius => Form {
            coords: true,
            store: true,
            ..none
        },
        Op::GeoRadiusRo => Form {
            coords: true,
            ..none
        },
        Op::GeoRadiusByMember => Form {
            member: true,
            store: true,
            ..none
        },
        Op::GeoRadiusByMemberRo => Form {
            member: true,
            ..none
        },
        Op::GeoSearch => Form {
            search: true,
            ..none
        },
        _ => Form {
            search: true,
            search_store: true,
            ..none
        },
    }
}

/// `georadiusGeneric` up to its reply: `a` is the command after its name, `zset` the source
/// (already type-checked).
fn search(op: Op, a: &[Bytes], zset: Option<&ZSet>) -> Result<Outcome, CommandError> {
    let form = form(op);
    let mut store_key: Option<Bytes> = None;
    let mut store_dist = false;
    let mut center = (0.0, 0.0);
    let mut shape = Shape::Radius(0.0);
    let mut conversion = 1.0;
    let base = if form.coords {
        center = long_lat(&a[1..3])?;
        let (r, c) = radius(&a[3..5])?;
        (shape, conversion) = (Shape::Radius(r), c);
        5
    } else if form.member {
        if let Some(zset) = zset {
            center = member_position(zset, &a[1])
                .ok_or_else(|| text("ERR could not decode requested zset member"))?;
            let (r, c) = radius(&a[2..4])?;
            (shape, conversion) = (Shape::Radius(r), c);
        }
        4
    } else if form.search_store {
        store_key = Some(a[0].clone());
        2
    } else {
        1
    };
    let (mut with_dist, mut with_hash, mut with_coord) = (false, false, false);
    let (mut from_member, mut from_loc, mut by_radius, mut by_box) = (false, false, false, false);
    let mut sort = Sort::None;
    let mut any = false;
    let mut count: i64 = 0;
    let options = a.get(base..).unwrap_or_default();
    let remaining = options.len();
    let mut i = 0;
    while i < remaining {
        let arg = &options[i];
        let more = remaining - i - 1;
        if is(arg, "withdist") {
            with_dist = true;
        } else if is(arg, "withhash") {
            with_hash = true;
        } else if is(arg, "withcoord") {
            with_coord = true;
        } else if is(arg, "any") {
            any = true;
        } else if is(arg, "asc") {
            sort = Sort::Asc;
        } else if is(arg, "desc") {
            sort = Sort::Desc;
        } else if is(arg, "count") && more >= 1 {
            count = crate::number::parse_i64(&options[i + 1]).ok_or(CommandError::NotAnInteger)?;
            if count <= 0 {
                return Err(text("ERR COUNT must be > 0"));
            }
            i += 1;
        } else if (is(arg, "store") || is(arg, "storedist")) && more >= 1 && form.store {
            store_key = Some(options[i + 1].clone());
            store_dist = is(arg, "storedist");
            i += 1;
        } else if is(arg, "storedist") && form.search_store {
            store_dist = true;
        } else if is(arg, "frommember") && more >= 1 && form.search && !from_loc {
            if let Some(zset) = zset {
                center = member_position(zset, &options[i + 1])
                    .ok_or_else(|| text("ERR could not decode requested zset member"))?;
            }
            from_member = true;
            i += 1;
        } else if is(arg, "fromlonlat") && more >= 2 && form.search && !from_member {
            center = long_lat(&options[i + 1..i + 3])?;
            from_loc = true;
            i += 2;
        } else if is(arg, "byradius") && more >= 2 && form.search && !by_box {
            let (r, c) = radius(&options[i + 1..i + 3])?;
            (shape, conversion) = (Shape::Radius(r), c);
            by_radius = true;
            i += 2;
        } else if is(arg, "bybox") && more >= 3 && form.search && !by_radius {
            let (width, height, c) = bounding_box(&options[i + 1..i + 4])?;
            (shape, conversion) = (Shape::Box { width, height }, c);
            by_box = true;
            i += 3;
        } else {
            return Err(CommandError::Syntax);
        }
        i += 1;
    }
    if store_key.is_some() && (with_dist || with_hash || with_coord) {
        return Err(CommandError::Text(format!(
            "ERR {} is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
            if form.search_store {
                "GEOSEARCHSTORE"
            } else {
                "STORE option in GEORADIUS"
            }
        )));
    }
    // Redis names the command in these two errors as the client wrote it; here it is the
    // lowercase name (the request's spelling is not kept past parsing).
    if form.search && !(from_member || from_loc) {
        return Err(CommandError::Text(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {}",
            op.name()
        )));
    }
    if form.search && !(by_radius || by_box) {
        return Err(CommandError::Text(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {}",
            op.name()
        )));
    }
    if any && count == 0 {
        return Err(text("ERR the ANY argument requires COUNT argument"));
    }
    let Some(zset) = zset else {
        return Ok(match store_key {
            Some(key) => Outcome::Store {
                key,
                points: Vec::new(),
                dist: store_dist,
            },
            None => Outcome::Reply(Reply::Array(Vec::new())),
        });
    };
    // COUNT without an order returns the nearest ones (not with ANY).
    if count != 0 && sort == Sort::None && !any {
        sort = Sort::Asc;
    }
    let search = Search {
        longitude: center.0,
        latitude: center.1,
        shape,
        conversion,
    };
    let limit = if any { count as usize } else { 0 };
    let mut points = points_in(zset, &search, limit);
    if points.is_empty() && store_key.is_none() {
        return Ok(Outcome::Reply(Reply::Array(Vec::new())));
    }
    // Stable, as glibc's qsort (a merge sort) is.
    match sort {
        Sort::Asc => points.sort_by(|x, y| {
            x.dist
                .partial_cmp(&y.dist)
                .unwrap_or(std::cmp::Ordering::Equal)
        }),
        Sort::Desc => points.sort_by(|x, y| {
            y.dist
                .partial_cmp(&x.dist)
                .unwrap_or(std::cmp::Ordering::Equal)
        }),
        Sort::None => {}
    }
    if count != 0 {
        points.truncate(count as usize);
    }
    for point in &mut points {
        point.dist /= conversion;
    }
    Ok(match store_key {
        Some(key) => Outcome::Store {
            key,
            points,
            dist: store_dist,
        },
        None => Outcome::Points {
            points,
            with_dist,
            with_hash,
            with_coord,
        },
    })
}

fn coordinate(value: f64) -> Reply {
    Reply::Double(Bytes::from(geohash::format_human(value)))
}

impl<S: ChangeSink> Cx<'_, S> {
    /// GEOADD `key [NX|XX] [CH] lon lat member...`: ZADD with the positions' scores.
    pub fn geoadd(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let (mut nx, mut xx) = (false, false);
        let mut at = 1;
        while at < a.len() {
            let option = &a[at];
            if is(option, "nx") {
                nx = true;
            } else if is(option, "xx") {
                xx = true;
            } else if !is(option, "ch") {
                break;
            }
            at += 1;
        }
        if !(a.len() - at).is_multiple_of(3) || (xx && nx) {
            return Err(CommandError::Syntax);
        }
        let mut zadd: Vec<Bytes> = a[..at].to_vec();
        for element in a[at..].chunks_exact(3) {
            let (longitude, latitude) = long_lat(&element[..2])?;
            let score = geohash::score_of(longitude, latitude).expect("inside the limits");
            zadd.push(Bytes::from(score.to_string()));
            zadd.push(element[2].clone());
        }
        self.op = Op::ZAdd;
        self.zadd(&zadd)
    }

    /// GEODIST `key member1 member2 [unit]`.
    pub fn geodist(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let to_meter = match a.len() {
            3 => 1.0,
            4 => unit(&a[3])?,
            _ => return Err(CommandError::Syntax),
        };
        let value = self.store.view(&a[0], ZSET, self.now, self.sink)?;
        let Some(zset) = zset_ref(value) else {
            return Ok(Reply::NullBulk);
        };
        let (Some(first), Some(second)) = (zset.scores.get(&a[1][..]), zset.scores.get(&a[2][..]))
        else {
            return Ok(Reply::NullBulk);
        };
        let (Some((lon1, lat1)), Some((lon2, lat2))) = (
            geohash::decode_score(*first),
            geohash::decode_score(*second),
        ) else {
            return Ok(Reply::NullBulk);
        };
        let distance = geohash::distance(lon1, lat1, lon2, lat2) / to_meter;
        Ok(Reply::Bulk(Bytes::from(geohash::format_distance(distance))))
    }

    /// GEOHASH `key member...`: 11-character standard geohashes (nil for a missing member).
    pub fn geohash(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let value = self.store.view(&a[0], ZSET, self.now, self.sink)?;
        let zset = zset_ref(value);
        Ok(Reply::Array(
            a[1..]
                .iter()
                .map(|member| {
                    zset.and_then(|z| z.scores.get(&member[..]))
                        .and_then(|score| geohash::standard_geohash(*score))
                        .map_or(Reply::NullBulk, |hash| {
                            Reply::Bulk(Bytes::copy_from_slice(&hash))
                        })
                })
                .collect(),
        ))
    }

    /// GEOPOS `key member...`: `[longitude, latitude]` each (a nil array for a missing one).
    pub fn geopos(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let value = self.store.view(&a[0], ZSET, self.now, self.sink)?;
        let zset = zset_ref(value);
        Ok(Reply::Array(
            a[1..]
                .iter()
                .map(|member| {
                    zset.and_then(|z| member_position(z, member))
                        .map_or(Reply::NullArray, |(lon, lat)| {
                            Reply::Array(vec![coordinate(lon), coordinate(lat)])
                        })
                })
                .collect(),
        ))
    }

    /// GEOSEARCH, GEOSEARCHSTORE, GEORADIUS, GEORADIUS_RO, GEORADIUSBYMEMBER,
    /// GEORADIUSBYMEMBER_RO. The STORE forms are logged as written.
    pub fn geosearch(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let source = if self.op == Op::GeoSearchStore {
            &a[1]
        } else {
            &a[0]
        };
        let value = self.store.view(source, ZSET, self.now, self.sink)?;
        let outcome = search(self.op, a, zset_ref(value))?;
        match outcome {
            Outcome::Reply(reply) => Ok(reply),
            Outcome::Points {
                points,
                with_dist,
                with_hash,
                with_coord,
            } => {
                let options =
                    usize::from(with_dist) + usize::from(with_hash) + usize::from(with_coord);
                Ok(Reply::Array(
                    points
                        .into_iter()
                        .map(|point| {
                            if options == 0 {
                                return Reply::Bulk(point.member);
                            }
                            let mut item = vec![Reply::Bulk(point.member)];
                            if with_dist {
                                item.push(Reply::Bulk(Bytes::from(geohash::format_distance(
                                    point.dist,
                                ))));
                            }
                            if with_hash {
                                item.push(Reply::Integer(point.score as i64));
                            }
                            if with_coord {
                                item.push(Reply::Array(vec![
                                    coordinate(point.longitude),
                                    coordinate(point.latitude),
                                ]));
                            }
                            Reply::Array(item)
                        })
                        .collect(),
                ))
            }
            Outcome::Store { key, points, dist } => {
                let count = points.len();
                let existed = self.store.remove(&key).is_some();
                if count > 0 {
                    let mut result = ZSet::default();
                    for point in points {
                        let score = if dist { point.dist } else { point.score };
                        result.insert(CompactBytes::from(point.member), score);
                    }
                    self.store.insert_new(
                        CompactBytes::new(&key),
                        Value::ZSet(Box::new(result)),
                        None,
                    );
                    let event = if self.op == Op::GeoSearchStore {
                        "geosearchstore"
                    } else {
                        "georadiusstore"
                    };
                    self.store.notify(crate::notify::Class::Zset, event, &key);
                } else if existed {
                    self.store
                        .notify(crate::notify::Class::Generic, "del", &key);
                }
                if count > 0 || existed {
                    self.log_as_written(a);
                }
                Ok(Reply::Integer(count as i64))
            }
        }
    }
}
