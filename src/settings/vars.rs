//! The variables settings are read from: each value with where it came from (an environment
//! variable or the flag that overrode it), so that an invalid value's error names its source.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};

use super::{SettingsError, parse};

/// Looks up variables, remembering for error messages where each value came from, and collecting
/// every bad value instead of stopping at the first.
pub(super) struct Vars {
    values: HashMap<String, (String, String)>,
    errors: RefCell<Vec<SettingsError>>,
    /// Every name looked up, set or not: the variables the settings read (the settings
    /// reference in docs/ is checked against it).
    asked: RefCell<BTreeSet<String>>,
}

impl Vars {
    /// Variable name → (value, where it came from).
    pub(super) fn new(values: HashMap<String, (String, String)>) -> Vars {
        Vars {
            values,
            errors: RefCell::new(Vec::new()),
            asked: RefCell::new(BTreeSet::new()),
        }
    }

    /// The bad values recorded so far, in the order they were read.
    pub(super) fn take_errors(&self) -> Vec<SettingsError> {
        std::mem::take(&mut self.errors.borrow_mut())
    }

    pub(super) fn get(&self, name: &str) -> Option<&(String, String)> {
        self.asked.borrow_mut().insert(name.to_string());
        self.values.get(name)
    }

    /// The names looked up so far.
    pub(super) fn asked(&self) -> BTreeSet<String> {
        self.asked.borrow().clone()
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
        let Some((value, source)) = self.get(name) else {
            return Ok(default);
        };
        match f(value) {
            Ok(parsed) => Ok(parsed),
            Err(reason) => {
                // Recorded, and the default stands in so the other settings are still read;
                // `Settings::from_vars` then reports every recorded error together.
                self.errors.borrow_mut().push(SettingsError {
                    name: source.clone(),
                    value: value.clone(),
                    also: Vec::new(),
                    reason,
                });
                Ok(default)
            }
        }
    }

    /// Refuses `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true` for a store that cannot honour it
    /// (`why`: the store and the reason), recorded like a bad value: charging no key of a
    /// request once one is over needs every key read and charged in one atomic step.
    pub(super) fn refuse_stop_increment(&self, why: &str) {
        let _ = self.parse("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", (), |s| {
            match super::parse::go_bool(s)? {
                false => Ok(()),
                true => Err(format!("not supported with {why}")),
            }
        });
    }

    pub(super) fn bool(&self, name: &str, default: bool) -> Result<bool, SettingsError> {
        self.parse(name, default, parse::go_bool)
    }
}
