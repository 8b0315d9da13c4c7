//! Redis's configuration file format and command line: a directive per line (`name arg ...`,
//! `#` comments), arguments split as Redis's `sdssplitargs` splits them (double quotes with
//! `\n \r \t \b \a \\ \" \xHH` escapes, single quotes with `\'`), `include FILE` (a glob
//! pattern includes every match, none is fine). The command line's `--name value ...` options
//! (see [`super::cli`]) are appended after the file, as if they were its last lines.

use std::fmt;
use std::path::{Path, PathBuf};

/// One directive, with where it came from (for error messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    /// Lowercased, as Redis reads it.
    pub name: String,
    pub args: Vec<String>,
    pub origin: Origin,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    File { path: PathBuf, line: usize },
    CommandLine,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File { path, line } => write!(f, "{}:{line}", path.display()),
            Origin::CommandLine => f.write_str("command line"),
        }
    }
}

/// Splits a line as Redis's `sdssplitargs`; `None` for unbalanced quotes (or a closing quote
/// not followed by a space).
pub fn split_args(line: &str) -> Option<Vec<String>> {
    let bytes = line.as_bytes();
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= bytes.len() {
            return Some(args);
        }
        let mut current = Vec::new();
        let (mut in_double, mut in_single) = (false, false);
        loop {
            let c = bytes.get(i).copied();
            if in_double {
                match c {
                    None => return None,
                    Some(b'\\')
                        if bytes.get(i + 1) == Some(&b'x')
                            && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
                            && bytes.get(i + 3).is_some_and(u8::is_ascii_hexdigit) =>
                    {
                        let hex = std::str::from_utf8(&bytes[i + 2..i + 4]).ok()?;
                        current.push(u8::from_str_radix(hex, 16).ok()?);
                        i += 3;
                    }
                    Some(b'\\') if i + 1 < bytes.len() => {
                        i += 1;
                        current.push(match bytes[i] {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 0x08,
                            b'a' => 0x07,
                            other => other,
                        });
                    }
                    Some(b'"') => {
                        if bytes.get(i + 1).is_some_and(|b| !b.is_ascii_whitespace()) {
                            return None;
                        }
                        i += 1;
                        break;
                    }
                    Some(other) => current.push(other),
                }
            } else if in_single {
                match c {
                    None => return None,
                    Some(b'\\') if bytes.get(i + 1) == Some(&b'\'') => {
                        i += 1;
                        current.push(b'\'');
                    }
                    Some(b'\'') => {
                        if bytes.get(i + 1).is_some_and(|b| !b.is_ascii_whitespace()) {
                            return None;
                        }
                        i += 1;
                        break;
                    }
                    Some(other) => current.push(other),
                }
            } else {
                match c {
                    None | Some(b' ' | b'\n' | b'\r' | b'\t') => break,
                    Some(b'"') => in_double = true,
                    Some(b'\'') => in_single = true,
                    Some(other) => current.push(other),
                }
            }
            i += 1;
        }
        args.push(String::from_utf8_lossy(&current).into_owned());
    }
}

/// Quotes `arg` as Redis's `sdscatrepr` does, so [`split_args`] reads it back.
pub fn quote(arg: &str) -> String {
    let mut out = String::with_capacity(arg.len() + 2);
    out.push('"');
    for byte in arg.bytes() {
        match byte {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            b if b.is_ascii_graphic() || b == b' ' => out.push(b as char),
            b => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    out
}

/// Why a configuration could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    Io { path: PathBuf, error: String },
    Quotes(Origin),
    IncludeDepth(PathBuf),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io { path, error } => {
                write!(f, "can't open config file '{}': {error}", path.display())
            }
            ReadError::Quotes(origin) => {
                write!(f, "{origin}: Unbalanced quotes in configuration line")
            }
            ReadError::IncludeDepth(path) => {
                write!(f, "'{}': includes nested too deeply", path.display())
            }
        }
    }
}

/// Includes nest at most this deep (a file including itself would never end).
const MAX_INCLUDE_DEPTH: usize = 16;

/// Reads the directives of `path` in order, following `include`s.
pub fn read_file(path: &Path, out: &mut Vec<Directive>) -> Result<(), ReadError> {
    read_nested(path, out, 0)
}

fn read_nested(path: &Path, out: &mut Vec<Directive>, depth: usize) -> Result<(), ReadError> {
    if depth > MAX_INCLUDE_DEPTH {
        return Err(ReadError::IncludeDepth(path.to_owned()));
    }
    let text = std::fs::read(path).map_err(|error| ReadError::Io {
        path: path.to_owned(),
        error: error.to_string(),
    })?;
    let text = String::from_utf8_lossy(&text);
    for (i, line) in text.split('\n').enumerate() {
        let origin = Origin::File {
            path: path.to_owned(),
            line: i + 1,
        };
        let Some(directive) = parse_line(line, origin.clone())? else {
            continue;
        };
        if directive.name == "include" && directive.args.len() == 1 {
            for included in expand_include(&directive.args[0]) {
                read_nested(&included, out, depth + 1)?;
            }
            continue;
        }
        out.push(directive);
    }
    Ok(())
}

/// Parses one line: `None` for a blank line or a comment.
pub fn parse_line(line: &str, origin: Origin) -> Result<Option<Directive>, ReadError> {
    let line = line.trim_matches(|c| matches!(c, ' ' | '\t' | '\r' | '\n'));
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let mut args = split_args(line).ok_or_else(|| ReadError::Quotes(origin.clone()))?;
    if args.is_empty() {
        return Ok(None);
    }
    let name = args.remove(0).to_ascii_lowercase();
    Ok(Some(Directive { name, args, origin }))
}

/// `include PATH`: the file, or every file a wildcard in its last component matches (sorted,
/// as glob(3) sorts them; none is fine, as in Redis).
fn expand_include(pattern: &str) -> Vec<PathBuf> {
    let path = Path::new(pattern);
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return vec![path.to_owned()];
    };
    if !name.contains(['*', '?', '[']) {
        return vec![path.to_owned()];
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut matches: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| {
            entry.file_name().to_str().is_some_and(|file| {
                crate::glob::glob_match(name.as_bytes(), file.as_bytes(), false)
            })
        })
        .map(|entry| entry.path())
        .collect();
    matches.sort();
    matches
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(line: &str) -> Option<Vec<String>> {
        split_args(line)
    }

    #[test]
    fn splits_like_sdssplitargs() {
        assert_eq!(
            split("save 900 1"),
            Some(vec!["save".into(), "900".into(), "1".into()])
        );
        assert_eq!(split("logfile ''"), Some(vec!["logfile".into(), "".into()]));
        assert_eq!(
            split(r#"a "x\ny\x41" 'it\'s'"#),
            Some(vec!["a".into(), "x\nyA".into(), "it's".into()])
        );
        assert_eq!(split("a \"open"), None);
        assert_eq!(split("a \"x\"y"), None);
        assert_eq!(split("   "), Some(vec![]));
        let awkward = "a \"b\\\" \t\x01";
        assert_eq!(split(&quote(awkward)), Some(vec![awkward.to_owned()]));
    }

    #[test]
    fn includes_are_followed() {
        let dir = std::env::temp_dir().join(format!("kv-conf-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("conf.d")).unwrap();
        std::fs::write(
            dir.join("main.conf"),
            format!(
                "# comment\nport 1\ninclude {}/conf.d/*.conf\ninclude {}/conf.d/none-*.x\n\
                 save 900 1\n",
                dir.display(),
                dir.display()
            ),
        )
        .unwrap();
        std::fs::write(dir.join("conf.d/a.conf"), "maxmemory 1mb\n").unwrap();
        std::fs::write(dir.join("conf.d/b.conf"), "  bind 0.0.0.0  \r\n").unwrap();
        let mut out = Vec::new();
        read_file(&dir.join("main.conf"), &mut out).unwrap();
        let names: Vec<&str> = out.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["port", "maxmemory", "bind", "save"]);
        assert_eq!(out[2].args, vec!["0.0.0.0".to_owned()]);
        std::fs::write(
            dir.join("loop.conf"),
            format!("include {}/loop.conf\n", dir.display()),
        )
        .unwrap();
        assert!(matches!(
            read_file(&dir.join("loop.conf"), &mut Vec::new()),
            Err(ReadError::IncludeDepth(_))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
