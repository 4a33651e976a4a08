//! Policy-database rules whose domain a configuration file (or an xDS push) also defines. Without
//! `MERGE_DOMAIN_CONFIG` two documents of one domain are a `duplicate domain` error, which would
//! fail the whole round: a rule written before the file gained the domain would then block every
//! later file or xDS change. Instead the file wins — it is the reviewed, versioned source the
//! operator deploys, while a rule is a runtime adjustment — and the rules of that domain are left
//! out of the round and reported ([`Clash`]): a WARN naming both sources, `ConfigHandle::clashes`
//! and the `policy_rules_shadowed` counter.

use std::collections::HashMap;

use ratelimitd_core::config::ConfigFile;

/// One policy-database domain left out because a file defines it too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clash {
    /// The domain.
    pub domain: String,
    /// The file (or xDS resource) that defines it and wins.
    pub file: String,
    /// The policy database's document of that domain, left out.
    pub rules: String,
}

/// The `domain` of a YAML document, when it parses and has one (a document that does not parse
/// is the compiler's to report).
fn domain_of(contents: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Head {
        domain: Option<String>,
    }
    serde_yaml::from_str::<Head>(contents).ok()?.domain
}

/// Splits `extra` into the documents to compile with `files` and the clashes: those whose domain
/// one of `files` defines.
pub(crate) fn split(files: &[ConfigFile], extra: &[ConfigFile]) -> (Vec<ConfigFile>, Vec<Clash>) {
    let mut defined: HashMap<String, &str> = HashMap::new();
    for f in files {
        if let Some(d) = domain_of(&f.contents) {
            defined.entry(d).or_insert(&f.name);
        }
    }
    let mut kept = Vec::with_capacity(extra.len());
    let mut clashes = Vec::new();
    for doc in extra {
        match domain_of(&doc.contents).and_then(|d| defined.get(&d).map(|f| (d, *f))) {
            Some((domain, file)) => clashes.push(Clash {
                domain,
                file: file.to_string(),
                rules: doc.name.clone(),
            }),
            None => kept.push(doc.clone()),
        }
    }
    (kept, clashes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reload::test_file as file;

    #[test]
    fn a_rule_domain_a_file_defines_is_left_out_and_named() {
        let files = [
            file("api.yaml", "domain: api\ndescriptors: []\n"),
            file("bad.yaml", ": :"),
        ];
        let extra = [
            file("policy-db/api", r#"{"domain":"api","descriptors":[]}"#),
            file("policy-db/web", r#"{"domain":"web","descriptors":[]}"#),
        ];
        let (kept, clashes) = split(&files, &extra);
        assert_eq!(kept, vec![extra[1].clone()]);
        assert_eq!(
            clashes,
            vec![Clash {
                domain: "api".into(),
                file: "api.yaml".into(),
                rules: "policy-db/api".into(),
            }]
        );
    }
}
