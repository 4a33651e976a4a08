//! Observability settings: stats sinks (`USE_STATSD`, `USE_PROMETHEUS`, `DISABLE_STATS`, ...),
//! the stat-key bound, and tracing (`TRACING_*`, `OTEL_EXPORTER_OTLP_*`). Go names and defaults.

use std::time::Duration;

use super::{SettingsError, StatsdProtocol, Vars, parse};

use crate::metrics::mogrifier::{Mogrifier, MogrifierError};
pub(crate) use crate::metrics::{Observability, StatsSinkKind};
pub(crate) use crate::telemetry::{TracingProtocol, TracingSettings};

fn tags(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for pair in s.split(',').filter(|p| !p.is_empty()) {
        let (k, v) = pair
            .split_once(':')
            .ok_or_else(|| format!("expected k:v pairs separated by commas, got {pair:?}"))?;
        out.push((k.trim().to_string(), v.trim().to_string()));
    }
    out.sort();
    Ok(out)
}

/// `USE_DOG_STATSD_MOGRIFIERS` (names separated by commas) and, for each name, upper-cased as Go
/// looks them up, `DOG_STATSD_MOGRIFIER_<NAME>_PATTERN` and `_NAME` (both required) and `_TAGS`.
/// Read whenever set, so a broken mogrifier is refused even before `USE_DOG_STATSD` is turned on.
fn mogrifiers(v: &Vars) -> Result<Vec<Mogrifier>, SettingsError> {
    let names = v.parse("USE_DOG_STATSD_MOGRIFIERS", Vec::new(), |s| {
        if s.trim().is_empty() {
            return Ok(Vec::new());
        }
        s.split(',')
            .map(|n| {
                let n = n.trim();
                if n.is_empty() || !n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    return Err(format!(
                        "expected mogrifier names (letters, digits and _) separated by commas, \
                         got {n:?}"
                    ));
                }
                Ok(n.to_ascii_uppercase())
            })
            .collect()
    })?;
    let mut out = Vec::new();
    for mogrifier in names {
        let var = |part: &str| format!("DOG_STATSD_MOGRIFIER_{mogrifier}_{part}");
        let missing = |name: String| SettingsError {
            name,
            value: String::new(),
            also: Vec::new(),
            reason: MogrifierError::Missing {
                mogrifier: mogrifier.clone(),
            }
            .to_string(),
        };
        let reason = |e: MogrifierError| e.to_string();
        let (pattern_var, name_var) = (var("PATTERN"), var("NAME"));
        if v.get(&pattern_var).is_none() {
            return Err(missing(pattern_var));
        }
        let pattern = v.parse(&pattern_var, None, |s| {
            Mogrifier::pattern(&mogrifier, s).map(Some).map_err(reason)
        })?;
        let name = v.string(&name_var, "");
        if name.is_empty() {
            return Err(missing(name_var));
        }
        let tags = v.parse(&var("TAGS"), Vec::new(), |s| {
            Mogrifier::tags(s).map_err(reason)
        })?;
        // A bad pattern is already recorded (and reported with every other bad value).
        if let Some(pattern) = pattern {
            out.push(Mogrifier::new(pattern, &name, tags));
        }
    }
    Ok(out)
}

/// Reads the observability settings. Each setting is read once, in this order, so bad values are
/// reported in it.
pub(super) fn from_vars(v: &Vars) -> Result<Observability, SettingsError> {
    let switches = SinkSwitches {
        prometheus: v.bool("USE_PROMETHEUS", false)?,
        statsd: v.parse("USE_STATSD", None, |s| parse::go_bool(s).map(Some))?,
        dogstatsd: v.bool("USE_DOG_STATSD", false)?,
    };
    refuse_prometheus_milliseconds(v);
    let mogrifiers = mogrifiers(v)?;
    let sink = sink(v, switches)?;
    let statsd_protocol = statsd_protocol(v, switches.dogstatsd && sink == StatsSinkKind::Statsd)?;
    Ok(Observability {
        sink,
        dogstatsd: switches.dogstatsd,
        statsd_host: v.string("STATSD_HOST", "localhost"),
        statsd_port: v.parse("STATSD_PORT", 8125, parse::port)?,
        statsd_protocol,
        mogrifiers,
        prometheus_addr: v.string("PROMETHEUS_ADDR", ":9090"),
        prometheus_path: v.string("PROMETHEUS_PATH", "/metrics"),
        prometheus_mapper_yaml: Some(v.string("PROMETHEUS_MAPPER_YAML", ""))
            .filter(|s| !s.is_empty()),
        extra_tags: v.parse("EXTRA_TAGS", Vec::new(), tags)?,
        stats_flush_interval: v.parse(
            "STATS_FLUSH_INTERVAL",
            Duration::from_secs(10),
            parse::go_duration,
        )?,
        stats_max_keys: v.parse("STATS_MAX_KEYS", 10_000, |s| {
            parse::uint_in(s, 1, u32::MAX.into())
        })? as usize,
        tracing: tracing(v)?,
    })
}

/// The variables that turn stats sinks on.
#[derive(Clone, Copy)]
struct SinkSwitches {
    /// `USE_PROMETHEUS`.
    prometheus: bool,
    /// `USE_STATSD` when set (unset means true, but is no conflict with another sink).
    statsd: Option<bool>,
    /// `USE_DOG_STATSD`.
    dogstatsd: bool,
}

/// `PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS=true` is refused (recorded with the other bad
/// values): response times are exported in seconds.
fn refuse_prometheus_milliseconds(v: &Vars) {
    let _ = v.parse(
        "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS",
        (),
        |s| match parse::go_bool(s)? {
            false => Ok(()),
            true => Err("not supported: response_time is exported in seconds".into()),
        },
    );
}

/// The stats sink `switches` and `DISABLE_STATS` choose. Go refuses two sinks at once; an
/// *unset* `USE_STATSD` (default true) is not a conflict here, so `USE_PROMETHEUS=true` or
/// `USE_DOG_STATSD=true` alone works (a documented divergence).
fn sink(v: &Vars, switches: SinkSwitches) -> Result<StatsSinkKind, SettingsError> {
    let statsd_set = switches.statsd == Some(true);
    if v.bool("DISABLE_STATS", false)? {
        Ok(StatsSinkKind::Disabled)
    } else if switches.dogstatsd {
        if switches.prometheus {
            return Err(conflict(
                v,
                "USE_PROMETHEUS",
                "USE_DOG_STATSD and USE_PROMETHEUS cannot both be true",
            ));
        }
        if statsd_set {
            return Err(conflict(
                v,
                "USE_STATSD",
                "USE_DOG_STATSD and USE_STATSD cannot both be true",
            ));
        }
        Ok(StatsSinkKind::Statsd)
    } else if switches.prometheus {
        if statsd_set {
            return Err(conflict(
                v,
                "USE_STATSD",
                "USE_STATSD and USE_PROMETHEUS cannot both be true",
            ));
        }
        Ok(StatsSinkKind::Prometheus)
    } else if switches.statsd.unwrap_or(true) {
        Ok(StatsSinkKind::Statsd)
    } else {
        Ok(StatsSinkKind::Disabled)
    }
}

/// `STATSD_PROTOCOL` (TCP by default), or UDP when the sink sends `dogstatsd`. Go's DogStatsD
/// sink (datadog-go) always sends UDP, and the Datadog agent's DogStatsD listens on UDP only:
/// DogStatsD goes over UDP, and an explicit `tcp` is refused rather than obeyed (it would reach no
/// agent) or ignored (the setting would lie).
fn statsd_protocol(v: &Vars, dogstatsd: bool) -> Result<StatsdProtocol, SettingsError> {
    let explicit = v.parse("STATSD_PROTOCOL", None, |s| {
        match s.to_ascii_lowercase().as_str() {
            "tcp" => Ok(Some(StatsdProtocol::Tcp)),
            "udp" => Ok(Some(StatsdProtocol::Udp)),
            _ => Err("expected tcp or udp".to_string()),
        }
    })?;
    if !dogstatsd {
        return Ok(explicit.unwrap_or(StatsdProtocol::Tcp));
    }
    if explicit == Some(StatsdProtocol::Tcp) {
        return Err(conflict(
            v,
            "STATSD_PROTOCOL",
            "DogStatsD (USE_DOG_STATSD=true) is sent over UDP, as Go's DogStatsD sink does \
             (the Datadog agent listens for DogStatsD on UDP only): unset STATSD_PROTOCOL or \
             set it to udp",
        ));
    }
    Ok(StatsdProtocol::Udp)
}

/// The tracing settings (`TRACING_*`, `OTEL_EXPORTER_OTLP_*`).
fn tracing(v: &Vars) -> Result<TracingSettings, SettingsError> {
    let protocol = |s: &str| match s {
        "http" => Ok(TracingProtocol::Http),
        "grpc" => Ok(TracingProtocol::Grpc),
        _ => Err("expected http or grpc".to_string()),
    };
    let rate = |s: &str| {
        s.parse::<f64>()
            .ok()
            .filter(|r| (0.0..=1.0).contains(r))
            .ok_or_else(|| "expected a number from 0 to 1".to_string())
    };
    let nonempty = |name| {
        v.get(name)
            .map(|(s, _)| s.clone())
            .filter(|s| !s.is_empty())
    };
    Ok(TracingSettings {
        enabled: v.bool("TRACING_ENABLED", false)?,
        protocol: v.parse("TRACING_EXPORTER_PROTOCOL", TracingProtocol::Http, protocol)?,
        service_name: v.string("TRACING_SERVICE_NAME", "RateLimit"),
        service_namespace: v.string("TRACING_SERVICE_NAMESPACE", ""),
        service_instance_id: v.string("TRACING_SERVICE_INSTANCE_ID", ""),
        sampling_rate: v.parse("TRACING_SAMPLING_RATE", 1.0, rate)?,
        traces_endpoint: nonempty("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
        endpoint: nonempty("OTEL_EXPORTER_OTLP_ENDPOINT"),
    })
}

/// A conflict between `name` and another setting, naming the variable as set (or the flag that
/// set it) with the value as written (`1`, `t`).
fn conflict(v: &Vars, name: &str, reason: &str) -> SettingsError {
    let (value, source) = v
        .get(name)
        .cloned()
        .unwrap_or_else(|| ("true".into(), name.into()));
    SettingsError {
        name: source,
        value,
        also: Vec::new(),
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Settings;

    fn obs(vars: &[(&str, &str)]) -> Result<Observability, SettingsError> {
        Settings::from_env(vars.iter().map(|(k, v)| (k.to_string(), v.to_string()))).map(|s| s.obs)
    }

    #[test]
    fn sink_precedence() {
        assert_eq!(obs(&[]).unwrap().sink, StatsSinkKind::Statsd);
        assert_eq!(
            obs(&[("USE_PROMETHEUS", "true")]).unwrap().sink,
            StatsSinkKind::Prometheus
        );
        assert_eq!(
            obs(&[("USE_STATSD", "false")]).unwrap().sink,
            StatsSinkKind::Disabled
        );
        let both = [("USE_PROMETHEUS", "true"), ("USE_STATSD", "true")];
        assert!(obs(&both).is_err());
        let disabled = [
            ("USE_PROMETHEUS", "true"),
            ("USE_STATSD", "true"),
            ("DISABLE_STATS", "1"),
        ];
        assert_eq!(obs(&disabled).unwrap().sink, StatsSinkKind::Disabled);
        assert!(obs(&[("TRACING_EXPORTER_PROTOCOL", "zipkin")]).is_err());
    }

    #[test]
    fn extra_tags_are_sorted() {
        let o = obs(&[("EXTRA_TAGS", "foo:bar,a:b")]).unwrap();
        assert_eq!(
            o.extra_tags,
            vec![("a".into(), "b".into()), ("foo".into(), "bar".into())]
        );
        assert!(obs(&[("EXTRA_TAGS", "nocolon")]).is_err());
    }

    #[test]
    fn dogstatsd_goes_over_udp_and_refuses_an_explicit_tcp() {
        let dog = obs(&[("USE_DOG_STATSD", "true")]).unwrap();
        assert_eq!(dog.statsd_protocol, StatsdProtocol::Udp);
        let udp = obs(&[("USE_DOG_STATSD", "true"), ("STATSD_PROTOCOL", "UDP")]).unwrap();
        assert_eq!(udp.statsd_protocol, StatsdProtocol::Udp);
        let e = obs(&[("USE_DOG_STATSD", "true"), ("STATSD_PROTOCOL", "tcp")]).unwrap_err();
        assert_eq!(e.name, "STATSD_PROTOCOL", "{e}");
        assert!(e.reason.contains("UDP"), "{e}");
        assert_eq!(obs(&[]).unwrap().statsd_protocol, StatsdProtocol::Tcp);
        let off = [
            ("USE_DOG_STATSD", "true"),
            ("STATSD_PROTOCOL", "tcp"),
            ("DISABLE_STATS", "true"),
        ];
        assert_eq!(obs(&off).unwrap().sink, StatsSinkKind::Disabled);
    }

    #[test]
    fn mogrifiers_are_read_in_order_and_their_mistakes_name_the_variable() {
        let ok = obs(&[
            ("USE_DOG_STATSD_MOGRIFIERS", "first, second"),
            ("DOG_STATSD_MOGRIFIER_FIRST_PATTERN", "^a"),
            ("DOG_STATSD_MOGRIFIER_FIRST_NAME", "x"),
            ("DOG_STATSD_MOGRIFIER_SECOND_PATTERN", "b"),
            ("DOG_STATSD_MOGRIFIER_SECOND_NAME", "y"),
            ("DOG_STATSD_MOGRIFIER_SECOND_TAGS", "k:$0"),
        ])
        .unwrap();
        assert_eq!(ok.mogrifiers.len(), 2);
        let named = |vars: &[(&str, &str)]| obs(vars).unwrap_err().name;
        let list = ("USE_DOG_STATSD_MOGRIFIERS", "M");
        let pattern = ("DOG_STATSD_MOGRIFIER_M_PATTERN", "^a");
        let name = ("DOG_STATSD_MOGRIFIER_M_NAME", "x");
        assert_eq!(named(&[list, name]), "DOG_STATSD_MOGRIFIER_M_PATTERN");
        assert_eq!(named(&[list, pattern]), "DOG_STATSD_MOGRIFIER_M_NAME");
        let bad_re = ("DOG_STATSD_MOGRIFIER_M_PATTERN", "a(");
        assert_eq!(
            named(&[list, bad_re, name]),
            "DOG_STATSD_MOGRIFIER_M_PATTERN"
        );
        let bad_tags = ("DOG_STATSD_MOGRIFIER_M_TAGS", "nocolon");
        assert_eq!(
            named(&[list, pattern, name, bad_tags]),
            "DOG_STATSD_MOGRIFIER_M_TAGS"
        );
        assert_eq!(
            named(&[("USE_DOG_STATSD_MOGRIFIERS", "a,,b")]),
            "USE_DOG_STATSD_MOGRIFIERS"
        );
    }
}
