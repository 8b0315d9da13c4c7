//! Value parsers shared by the examples' command lines (clap, derived).

/// A count of at least one (shards, connections, depth).
pub fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_start_at_one() {
        assert_eq!(at_least_one("4"), Ok(4));
        assert!(at_least_one("0").is_err());
        assert!(at_least_one("x").is_err());
    }
}
