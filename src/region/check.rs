//! The load-time check of limits with `regions` against the region this instance serves: a
//! regional limit without `REGION` set would enforce the whole worldwide limit in every region,
//! a region whose share of a limit is 0 would refuse every request, and demand-following shares
//! need the global store and every region listed; all are refused (at
//! startup, and at every reload, where the configuration in service then stays), naming the file
//! and YAML path and what to set.

use ratelimitd_core::config::{Limit, RateLimitConfig};

/// What a configuration is checked against: `REGION` and whether there is a global store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegionCheck {
    /// `REGION`, when set.
    pub region: Option<String>,
    /// Whether `GLOBAL_REDIS_URL` is set (`follow_demand` needs it).
    pub global_store: bool,
}

impl RegionCheck {
    /// One line per regional limit this instance cannot enforce; `Ok` when there is none.
    pub fn check(&self, config: &RateLimitConfig) -> Result<(), String> {
        let errors: Vec<String> = config
            .limits()
            .into_iter()
            .filter_map(|l| self.problem(l))
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("\n"))
        }
    }

    fn problem(&self, l: &Limit) -> Option<String> {
        let regions = l.regions.as_ref()?;
        let at = format!("{}: {}: limit {}", l.file, regions.path, l.full_key);
        let listed = regions
            .shares
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        match &self.region {
            None => Some(format!(
                "{at}: regions needs REGION to be set (one of {listed}, or another region for the \
                 default share); without it every region would admit the whole limit"
            )),
            Some(r) if regions.follow.is_some() && regions.index_of(r).is_none() => Some(format!(
                "{at}: REGION={r} is not listed; with follow_demand every region sharing the \
                 limit must be (listed: {listed})"
            )),
            Some(_) if regions.follow.is_some() && !self.global_store => Some(format!(
                "{at}: follow_demand needs the global store the regions exchange demand through: \
                 set GLOBAL_REDIS_URL (or list fixed shares without follow_demand)"
            )),
            Some(r) if regions.share_of(r) <= 0.0 => Some(format!(
                "{at}: REGION={r} has no share of this limit (the listed regions {listed} take it \
                 all); list {r} under shares or set default_share"
            )),
            Some(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratelimitd_core::config::{CompileOptions, ConfigFile, compile};

    fn config(rate_limit: &str) -> RateLimitConfig {
        let yaml = format!(
            "domain: d\ndescriptors:\n  - {{key: a, rate_limit: {{unit: minute, requests_per_unit: 10, {rate_limit}}}}}\n"
        );
        let files = [ConfigFile {
            name: "d.yaml".into(),
            contents: yaml,
        }];
        compile(&files, &CompileOptions::default()).unwrap()
    }

    fn region(r: Option<&str>) -> RegionCheck {
        RegionCheck {
            region: r.map(str::to_string),
            global_store: false,
        }
    }

    #[test]
    fn a_regional_limit_needs_a_region_with_a_share() {
        let c = config("regions: {shares: {eu: 0.6, us: 0.4}}");
        let e = region(None).check(&c).unwrap_err();
        assert!(
            e.starts_with(
                "d.yaml: descriptors[0].rate_limit.regions: limit d.a: regions needs REGION"
            ),
            "{e}"
        );
        assert!(e.contains("one of eu, us"), "{e}");
        let e = region(Some("ap")).check(&c).unwrap_err();
        assert!(e.contains("REGION=ap has no share"), "{e}");
        assert!(region(Some("us")).check(&c).is_ok());
        // A default share (or what the listed ones leave) covers other regions.
        let c = config("regions: {shares: {eu: 0.6}}");
        assert!(region(Some("ap")).check(&c).is_ok());
        // Following demand needs every region listed and the global store.
        let c = config("regions: {shares: {eu: 0.5, us: 0.4}, follow_demand: true}");
        let e = region(Some("ap")).check(&c).unwrap_err();
        assert!(e.contains("REGION=ap is not listed"), "{e}");
        let e = region(Some("eu")).check(&c).unwrap_err();
        assert!(e.contains("set GLOBAL_REDIS_URL"), "{e}");
        let with_global = RegionCheck {
            global_store: true,
            ..region(Some("eu"))
        };
        assert!(with_global.check(&c).is_ok());
        // Global limits need nothing.
        assert!(region(None).check(&config("name: x")).is_ok());
    }
}
