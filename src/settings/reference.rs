//! The settings reference, `docs/settings.md`, compiled into the binary so that `--help` lists
//! every variable of its tables, section by section: one source for both, which cannot drift
//! (`tests/it/ops/settings_reference.rs` checks the tables, and the help built from them, against
//! the variables the code reads).

/// `docs/settings.md` as it was when the binary was built.
const REFERENCE: &str = include_str!("../../docs/settings.md");

/// Width the help's variable lists are wrapped at.
const WIDTH: usize = 100;

/// Every section of the reference that has a table, with the variables its rows name (first
/// cell), in the reference's order.
pub(crate) fn sections() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
    let mut title = "";
    for line in REFERENCE.lines() {
        if let Some(t) = line.strip_prefix("## ") {
            title = t.trim();
        } else if line.starts_with("| `")
            && let Some(cell) = line.split('|').nth(1)
        {
            let names = variables_in(cell);
            match out.last_mut() {
                Some((t, vars)) if *t == title => vars.extend(names),
                _ => out.push((title, names)),
            }
        }
    }
    out
}

/// Names in backticks that look like environment variables.
pub(crate) fn variables_in(text: &str) -> Vec<&str> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| {
            w.len() > 2
                && w.starts_with(|c: char| c.is_ascii_uppercase())
                && w.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        })
        .collect()
}

/// The part of `--help` after the flags: every variable, by section.
pub(crate) fn help() -> String {
    let mut out = String::from(
        "Every setting is an environment variable (the Go envoyproxy/ratelimit service's names \
         first); a flag overrides its variable.\nDefaults and meanings: docs/settings.md. The \
         variables, by section:\n",
    );
    for (title, vars) in sections() {
        out.push_str(&format!("\n{title}:\n"));
        let mut line = String::from(" ");
        for v in vars {
            if line.len() + v.len() + 2 > WIDTH {
                out.push_str(line.trim_end_matches(','));
                out.push('\n');
                line = String::from(" ");
            }
            line.push(' ');
            line.push_str(v);
            line.push(',');
        }
        out.push_str(line.trim_end_matches(','));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_section_is_listed_with_its_variables() {
        let sections = sections();
        let redis = sections.iter().find(|(t, _)| *t == "Redis").unwrap();
        assert!(redis.1.contains(&"REDIS_SOCKET_TYPE"), "{redis:?}");
        let help = help();
        for name in [
            "ADMIN_TOKEN",
            "USE_PROMETHEUS",
            "POLICY_DB_URL",
            "SHUTDOWN_DELAY",
        ] {
            assert!(help.contains(name), "{name} missing:\n{help}");
        }
        assert!(help.lines().all(|l| l.len() <= WIDTH + 40), "{help}");
    }
}
