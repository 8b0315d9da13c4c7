//! The `--budget-msgs` / `--budget-bytes` flags of corewire servers, as a runtime [`Budget`].

use std::fmt;

use corewire::Budget;

/// A budget flag that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetFlagError(String);

impl fmt::Display for BudgetFlagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "--budget-msgs expects a positive number or \"unlimited\", got {:?}",
            self.0
        )
    }
}

impl std::error::Error for BudgetFlagError {}

/// The budget the flags ask for. Without `--budget-msgs` the runtime's default applies
/// (`bytes`, if given, replaces its byte limit); `unlimited` lifts the message limit.
pub fn budget_from_flags(
    messages: Option<&str>,
    bytes: Option<usize>,
) -> Result<Budget, BudgetFlagError> {
    let base = match messages {
        None => Budget::default(),
        Some("unlimited") => Budget::UNLIMITED,
        Some(raw) => match raw.parse::<u32>() {
            Ok(n) if n > 0 => Budget::messages(n),
            _ => return Err(BudgetFlagError(raw.to_string())),
        },
    };
    Ok(match bytes {
        Some(b) => base.with_bytes(b),
        None => base,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_flags_to_budgets() {
        assert_eq!(budget_from_flags(None, None).unwrap(), Budget::default());
        assert_eq!(
            budget_from_flags(Some("unlimited"), None).unwrap(),
            Budget::UNLIMITED
        );
        assert_eq!(
            budget_from_flags(Some("32"), Some(4096)).unwrap(),
            Budget::messages(32).with_bytes(4096)
        );
        assert_eq!(
            budget_from_flags(None, Some(1000)).unwrap().max_bytes,
            Some(1000)
        );
        assert!(budget_from_flags(Some("0"), None).is_err());
        assert!(budget_from_flags(Some("lots"), None).is_err());
    }
}
