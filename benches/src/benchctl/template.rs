//! Command templates: `{name}` placeholders filled from a variable map. Unknown placeholders
//! are errors, so a typo in a plugged-in command fails before anything runs.

use std::collections::BTreeMap;
use std::fmt;

/// Variables available to a template.
pub type Vars = BTreeMap<String, String>;

/// A placeholder with no value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    pub template: String,
    pub placeholder: String,
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown placeholder {{{}}} in {:?}",
            self.placeholder, self.template
        )
    }
}

impl std::error::Error for TemplateError {}

/// Names of the placeholders `template` uses, in order of appearance.
pub fn placeholders(template: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let shell = rest[..open].ends_with('$');
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) if !shell && is_name(&after[..close]) => {
                names.push(&after[..close]);
                rest = &after[close + 1..];
            }
            _ => rest = after,
        }
    }
    names
}

fn is_name(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Replaces every `{name}` with its value. Braces that do not form a placeholder (a shell
/// `${X}`, JSON) are kept as they are.
pub fn render(template: &str, vars: &Vars) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(template.len() + 64);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        // `${NAME}` is left for the shell.
        let shell = rest[..open].ends_with('$');
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) if !shell && is_name(&after[..close]) => {
                let name = &after[..close];
                let value = vars.get(name).ok_or_else(|| TemplateError {
                    template: template.to_string(),
                    placeholder: name.to_string(),
                })?;
                out.push_str(value);
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vars {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn fills_placeholders_and_keeps_other_braces() {
        let v = vars(&[("addr", "127.0.0.1:9"), ("opt", "")]);
        assert_eq!(
            render("srv --addr {addr}{opt} ${HOME} {a b}", &v).unwrap(),
            "srv --addr 127.0.0.1:9 ${HOME} {a b}"
        );
        assert_eq!(
            placeholders("x {addr}{opt} {not it} ${HOME} {"),
            vec!["addr", "opt"]
        );
    }

    #[test]
    fn unknown_placeholders_are_errors() {
        let err = render("srv --shards {shard}", &vars(&[("shards", "2")])).unwrap_err();
        assert_eq!(err.placeholder, "shard");
    }
}
