//! Where the configuration files are and how they are read, from the settings: the source the
//! server reloads from, and the options `ratelimitd validate` reads files under.

use super::{Settings, SettingsError, Vars, parse};
use crate::reload::{ConfigSource, Location, Restriction};
use ratelimitd_core::algorithm::calendar::Zone;
use ratelimitd_core::config::{CompileOptions, LoadOptions};

impl Settings {
    /// How `ratelimitd validate` reads config files: under the server's size cap
    /// (`CONFIG_MAX_FILE_BYTES`), so a file the server would refuse fails the check too. No other
    /// setting is read: a check in CI needs none of the server's.
    pub fn validate_load_options(
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<LoadOptions, SettingsError> {
        let vars = Vars::new(vars.into_iter().map(|(k, v)| (k.clone(), (v, k))).collect());
        let max_file_bytes = max_file_bytes(&vars)?;
        match vars.take_errors().into_iter().next() {
            Some(bad) => Err(bad),
            None => Ok(LoadOptions {
                ignore_dotfiles: false,
                max_file_bytes,
            }),
        }
    }

    /// Where the configuration comes from: the `--config`/`RATELIMITD_CONFIG` path, or else the
    /// `RUNTIME_*` discovery; read under `CONFIG_MAX_FILE_BYTES` and `RUNTIME_IGNOREDOTFILES`,
    /// compiled with `MERGE_DOMAIN_CONFIG` and `CALENDAR_TIME_ZONE`; with `BACKEND_TYPE=memcache`, fixed
    /// windows only (`dynamodb`: no sliding logs or concurrency limits); limits with `regions` checked against `REGION`.
    pub fn config_source(&self) -> ConfigSource {
        let location = match &self.config_path {
            Some(p) => Location::Path(p.clone()),
            None => Location::Runtime {
                root: self.runtime_root.clone(),
                subdirectory: self.runtime_subdirectory.clone(),
                appdirectory: self.runtime_appdirectory.clone(),
                watch_root: self.runtime_watch_root,
            },
        };
        let load = LoadOptions {
            ignore_dotfiles: self.runtime_ignoredotfiles,
            max_file_bytes: self.config_max_file_bytes,
        };
        let compile = CompileOptions {
            merge_domains: self.merge_domain_config,
            calendar_time_zone: Some(self.calendar_time_zone),
        };
        let only = match self.backend {
            super::Backend::Memcache => Some(Restriction::MEMCACHE),
            super::Backend::Dynamodb => Some(Restriction::DYNAMODB),
            _ if self.fleet.is_some() => Some(Restriction::FLEET),
            _ => None,
        };
        ConfigSource::new(location, load, compile)
            .restricted(only)
            .regions(crate::region::RegionCheck {
                region: self.region.region.clone(),
                global_store: self.region.global.is_some(),
            })
    }
}

/// `CALENDAR_TIME_ZONE`: the zone of calendar windows that name none (default UTC); an IANA name
/// the bundled time zone database knows.
pub(super) fn calendar_time_zone(v: &Vars) -> Result<&'static Zone, SettingsError> {
    v.parse("CALENDAR_TIME_ZONE", Zone::utc(), |s| {
        Zone::get(s).ok_or_else(|| match ratelimitd_core::config::nearest_zone(s) {
            // The same suggestion as a file's `time_zone` gets.
            Some(near) => format!("unknown time zone; did you mean {near}?"),
            None => "expected an IANA time zone name such as Europe/Paris, America/New_York or UTC"
                .into(),
        })
    })
}

/// `CONFIG_MAX_FILE_BYTES`: the largest config file read (1 KiB to 1 GiB).
pub(super) fn max_file_bytes(v: &Vars) -> Result<u64, SettingsError> {
    v.parse(
        "CONFIG_MAX_FILE_BYTES",
        ratelimitd_core::config::DEFAULT_MAX_FILE_BYTES,
        |s| parse::uint_in(s, 1024, 1 << 30),
    )
}
