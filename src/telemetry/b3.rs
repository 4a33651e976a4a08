//! B3 trace propagation (Zipkin's headers), which the Go service accepts next to W3C
//! `traceparent`: the single `b3` header (`{trace}-{span}[-{sampled}[-{parent}]]`) and the
//! multi-header form (`x-b3-traceid`, `x-b3-spanid`, `x-b3-sampled`, `x-b3-flags`). A 64-bit
//! trace id is widened to 128 bits with leading zeros, as the B3 spec says. Only extraction
//! matters here (ratelimitd calls no traced service); injection writes the single header.

use std::sync::OnceLock;

use opentelemetry::Context;
use opentelemetry::propagation::text_map_propagator::FieldIter;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};

const SINGLE: &str = "b3";
const TRACE_ID: &str = "x-b3-traceid";
const SPAN_ID: &str = "x-b3-spanid";
const SAMPLED: &str = "x-b3-sampled";
const FLAGS: &str = "x-b3-flags";

/// The B3 propagator (single and multiple headers).
#[derive(Debug, Default)]
pub(crate) struct B3Propagator;

/// `s` is `len` lowercase or uppercase hex digits, not all zero.
fn hex_id(s: &str, lens: &[usize]) -> Option<u128> {
    if !lens.contains(&s.len()) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u128::from_str_radix(s, 16).ok().filter(|v| *v != 0)
}

/// The sampling state: `1`/`d` (debug)/`true` sample, `0`/`false` do not.
fn sampled(s: &str) -> Option<bool> {
    match s {
        "1" | "d" | "true" => Some(true),
        "0" | "false" => Some(false),
        _ => None,
    }
}

fn span_context(trace: &str, span: &str, sample: Option<bool>) -> Option<SpanContext> {
    let trace = hex_id(trace, &[16, 32])?;
    let span = hex_id(span, &[16])? as u64;
    let flags = match sample {
        Some(true) => TraceFlags::SAMPLED,
        _ => TraceFlags::default(),
    };
    Some(SpanContext::new(
        TraceId::from_bytes(trace.to_be_bytes()),
        SpanId::from_bytes(span.to_be_bytes()),
        flags,
        true,
        TraceState::default(),
    ))
}

/// The caller's span from the single `b3` header (a header of the sampling state alone carries
/// no span, so it gives none).
fn from_single(value: &str) -> Option<SpanContext> {
    let mut parts = value.trim().split('-');
    let (trace, span) = (parts.next()?, parts.next()?);
    let sample = match parts.next() {
        Some(s) => Some(sampled(s)?),
        None => None,
    };
    if let Some(parent) = parts.next() {
        hex_id(parent, &[16])?;
    }
    if parts.next().is_some() {
        return None;
    }
    span_context(trace, span, sample)
}

/// The caller's span from the `x-b3-*` headers.
fn from_multi(e: &dyn Extractor) -> Option<SpanContext> {
    let (trace, span) = (e.get(TRACE_ID)?.trim(), e.get(SPAN_ID)?.trim());
    let debug = e.get(FLAGS).is_some_and(|f| f.trim() == "1");
    let sample = match e.get(SAMPLED).map(str::trim) {
        _ if debug => Some(true),
        Some(s) => Some(sampled(s)?),
        None => None,
    };
    span_context(trace, span, sample)
}

impl TextMapPropagator for B3Propagator {
    fn inject_context(&self, cx: &Context, injector: &mut dyn Injector) {
        let span = cx.span();
        let sc = span.span_context();
        if sc.is_valid() {
            let sample = if sc.is_sampled() { "1" } else { "0" };
            let value = format!("{}-{}-{sample}", sc.trace_id(), sc.span_id());
            injector.set(SINGLE, value);
        }
    }

    fn extract_with_context(&self, cx: &Context, extractor: &dyn Extractor) -> Context {
        let found = match extractor.get(SINGLE) {
            Some(single) => from_single(single),
            None => from_multi(extractor),
        };
        match found {
            Some(sc) => cx.with_remote_span_context(sc),
            None => cx.clone(),
        }
    }

    fn fields(&self) -> FieldIter<'_> {
        static FIELDS: OnceLock<Vec<String>> = OnceLock::new();
        let fields = FIELDS.get_or_init(|| {
            [SINGLE, TRACE_ID, SPAN_ID, SAMPLED, FLAGS]
                .map(String::from)
                .to_vec()
        });
        FieldIter::new(fields)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn extract(headers: &[(&str, &str)]) -> SpanContext {
        let map: HashMap<String, String> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let cx = B3Propagator.extract(&map);
        cx.span().span_context().clone()
    }

    const TRACE: &str = "80f198ee56343ba864fe8b2a57d3eff7";
    const SPAN: &str = "e457b5a2e4d86bd1";

    #[test]
    fn single_header_gives_the_callers_span() {
        let sc = extract(&[("b3", &format!("{TRACE}-{SPAN}-1-05e3ac9a4f6e3b90"))]);
        assert_eq!(sc.trace_id().to_string(), TRACE);
        assert_eq!(sc.span_id().to_string(), SPAN);
        assert!(sc.is_sampled() && sc.is_remote());
        let unsampled = extract(&[("b3", &format!("{TRACE}-{SPAN}-0"))]);
        assert!(unsampled.is_valid() && !unsampled.is_sampled());
    }

    #[test]
    fn multi_headers_and_64_bit_trace_ids() {
        let sc = extract(&[
            ("x-b3-traceid", "64fe8b2a57d3eff7"),
            ("x-b3-spanid", SPAN),
            ("x-b3-sampled", "1"),
        ]);
        assert_eq!(
            sc.trace_id().to_string(),
            "000000000000000064fe8b2a57d3eff7"
        );
        assert!(sc.is_sampled());
        let debug = extract(&[
            ("x-b3-traceid", TRACE),
            ("x-b3-spanid", SPAN),
            ("x-b3-flags", "1"),
        ]);
        assert!(debug.is_sampled(), "debug implies sampled");
    }

    #[test]
    fn malformed_headers_give_no_parent() {
        for b3 in [
            "0",
            "d",
            "zz-zz",
            &format!("{TRACE}-{SPAN}-maybe"),
            &format!("{TRACE}-0000000000000000-1"),
            &format!("{TRACE}-{SPAN}-1-05e3ac9a4f6e3b90-extra"),
            &format!("+{}-{SPAN}", &TRACE[1..]),
        ] {
            assert!(!extract(&[("b3", b3)]).is_valid(), "{b3}");
        }
        assert!(!extract(&[("x-b3-traceid", TRACE)]).is_valid());
    }

    /// The service's propagators: `traceparent` alone is read, and B3 wins when both are sent
    /// (the Go service's order).
    #[test]
    fn the_service_reads_w3c_and_b3() {
        let parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let headers = |b3: bool| {
            let mut m = HashMap::from([("traceparent".to_string(), parent.to_string())]);
            if b3 {
                m.insert("b3".into(), format!("{TRACE}-{SPAN}-1"));
            }
            m
        };
        let p = crate::telemetry::propagator();
        let w3c = p.extract(&headers(false));
        assert_eq!(
            w3c.span().span_context().trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        let both = p.extract(&headers(true));
        assert_eq!(both.span().span_context().trace_id().to_string(), TRACE);
    }
}
