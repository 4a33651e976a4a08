//! The scalar readers of the typed config walk (see `model`): each reads one field of a YAML map
//! as the Go type yaml.v2 would decode it into, reports a mismatch at the field's YAML path (once,
//! not again when the generic key check already did), and lets the walk carry on with a default.

use serde_yaml::{Mapping, Value};

use super::convert::{go_fmt, is_go_leaf, unmarshal_error, untag, yaml11_bool};
use super::error::{Sink, field_path, index_path};

/// The typed walk; every conversion failure is reported at the field's path and defaulted.
pub(super) struct Typed<'s, 'a> {
    pub(super) sink: &'s mut Sink<'a>,
}

impl Typed<'_, '_> {
    /// Reports a type mismatch unless stage 2 already reported this very value (a float, or a
    /// list holding non-maps), so one mistake gives one error.
    pub(super) fn mismatch(&mut self, path: &str, v: &Value, go_type: &str) {
        let seen_by_key_check = match untag(v) {
            Value::Sequence(items) => items.iter().any(|i| !untag(i).is_mapping()),
            Value::Mapping(_) => false,
            leaf => !is_go_leaf(leaf),
        };
        if !seen_by_key_check {
            let field = path.rsplit('.').next();
            self.sink.push(path, unmarshal_error(v, field, go_type));
        }
    }

    /// A string field: any scalar is taken as its text, as yaml.v2 does for string targets.
    pub(super) fn string(&mut self, map: &Mapping, parent: &str, name: &str) -> Option<String> {
        let v = map.get(name)?;
        match untag(v) {
            Value::Null => Some(String::new()),
            Value::String(s) => Some(s.clone()),
            scalar @ (Value::Bool(_) | Value::Number(_)) if is_go_leaf(scalar) => {
                Some(go_fmt(scalar))
            }
            _ => {
                self.mismatch(&field_path(parent, name), v, "string");
                None
            }
        }
    }

    /// A bool field. yaml.v2 is YAML 1.1, where unquoted `yes`/`on`/`y`... are booleans; `serde_yaml`
    /// (YAML 1.2) hands those over as strings, so they are accepted here to read Go configs alike.
    pub(super) fn bool(&mut self, map: &Mapping, parent: &str, name: &str) -> Option<bool> {
        let v = map.get(name)?;
        match untag(v) {
            Value::Null => Some(false),
            Value::Bool(b) => Some(*b),
            Value::String(s) if yaml11_bool(s).is_some() => yaml11_bool(s),
            _ => {
                self.mismatch(&field_path(parent, name), v, "bool");
                None
            }
        }
    }

    /// A uint32 field; `None` when absent, null, or wrongly typed (reported).
    pub(super) fn uint32(&mut self, map: &Mapping, parent: &str, name: &str) -> Option<u32> {
        let v = map.get(name)?;
        let parsed = match untag(v) {
            Value::Null => return None,
            Value::Number(n) => n.as_i64().and_then(|i| u32::try_from(i).ok()),
            _ => None,
        };
        if parsed.is_none() {
            self.mismatch(&field_path(parent, name), v, "uint32");
        }
        parsed
    }

    /// A number field (integer or float); `None` when absent, null, or not a number (reported).
    pub(super) fn number(&mut self, map: &Mapping, parent: &str, name: &str) -> Option<f64> {
        let v = map.get(name)?;
        match untag(v) {
            Value::Null => None,
            Value::Number(n) => n.as_f64(),
            _ => {
                let path = field_path(parent, name);
                self.sink
                    .push(&path, unmarshal_error(v, Some(name), "float64"));
                None
            }
        }
    }

    /// The list of maps under `name`; non-map elements were reported by the key check.
    pub(super) fn list<'m>(
        &mut self,
        map: &'m Mapping,
        parent: &str,
        name: &str,
        go_type: &str,
    ) -> Vec<(String, &'m Mapping)> {
        let here = field_path(parent, name);
        match map.get(name).map(|v| (v, untag(v))) {
            None | Some((_, Value::Null)) => Vec::new(),
            Some((_, Value::Sequence(items))) => items
                .iter()
                .enumerate()
                .filter_map(|(i, item)| untag(item).as_mapping().map(|m| (index_path(&here, i), m)))
                .collect(),
            Some((v, _)) => {
                self.mismatch(&here, v, go_type);
                Vec::new()
            }
        }
    }
}
