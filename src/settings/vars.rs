//! The variables settings are read from: each value with where it came from (an environment
//! variable or the flag that overrode it), so that an invalid value's error names its source.

use std::collections::HashMap;

use super::{SettingsError, parse};

/// Looks up variables, remembering for error messages where each value came from.
pub(super) struct Vars(pub(super) HashMap<String, (String, String)>);

impl Vars {
    pub(super) fn get(&self, name: &str) -> Option<&(String, String)> {
        self.0.get(name)
    }

    pub(super) fn string(&self, name: &str, default: &str) -> String {
        self.get(name)
            .map_or(default, |(v, _)| v.as_str())
            .to_string()
    }

    pub(super) fn parse<T>(
        &self,
        name: &str,
        default: T,
        f: impl Fn(&str) -> Result<T, String>,
    ) -> Result<T, SettingsError> {
        match self.get(name) {
            None => Ok(default),
            Some((value, source)) => f(value).map_err(|reason| SettingsError {
                name: source.clone(),
                value: value.clone(),
                reason,
            }),
        }
    }

    pub(super) fn bool(&self, name: &str, default: bool) -> Result<bool, SettingsError> {
        self.parse(name, default, parse::go_bool)
    }
}
