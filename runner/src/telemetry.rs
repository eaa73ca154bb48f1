//! What runner tells an operator. The engine's spans (a run, its tasks and attempts, model
//! requests, tool calls, verifications, replans) and events go to stderr as text or JSON
//! lines, filtered by `RUST_LOG` (warnings and errors when it is unset), never to stdout,
//! which carries a command's result. When `OTEL_EXPORTER_OTLP_ENDPOINT` is set, the spans are
//! also exported over OTLP/HTTP to that collector, whatever `RUST_LOG` says.

use std::io::IsTerminal as _;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::ValueEnum;
use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing::level_filters::LevelFilter;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::prelude::*;

/// How diagnostics are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum LogFormat {
    /// Lines for a person.
    #[default]
    Text,
    /// One JSON object a line, for a log collector.
    Json,
}

/// What `RUST_LOG` holds when it is unset or empty.
const DEFAULT_FILTER: &str = "warn";
/// The variable that names the collector spans are exported to.
const ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The variable that lets prompts and outputs into the spans.
const CONTENT: &str = "RUNNER_OTEL_CONTENT";

/// The exporter of spans to a collector, when one is configured. [`Telemetry::finish`] sends
/// what is still buffered.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Exports the spans still buffered and stops the exporter.
    pub fn finish(self) {
        if let Some(provider) = self.provider
            && let Err(error) = provider.shutdown()
        {
            eprintln!("warning: the trace could not be exported to ${ENDPOINT}: {error}");
        }
    }
}

/// Installs the subscriber for the process. A span is written to stderr when it closes, with
/// its fields and how long it took.
pub fn init(format: LogFormat) -> Telemetry {
    let filter = match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.trim().is_empty() => EnvFilter::try_new(&directives).unwrap_or_else(|error| {
            eprintln!("warning: RUST_LOG is not a filter runner can read ({error}); logging warnings and errors only");
            EnvFilter::new(DEFAULT_FILTER)
        }),
        _ => EnvFilter::new(DEFAULT_FILTER),
    };
    let layer = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_span_events(FmtSpan::CLOSE);
    let stderr = match format {
        LogFormat::Text => layer.with_ansi(std::io::stderr().is_terminal()).with_filter(filter).boxed(),
        LogFormat::Json => layer.json().with_current_span(true).with_span_list(true).with_filter(filter).boxed(),
    };
    let provider = exporter().unwrap_or_else(|error| {
        eprintln!("warning: spans are not exported: {error}");
        None
    });
    // The collector gets runner's own spans only: not those of the HTTP client exporting them.
    let ours = Targets::new()
        .with_target("engine", LevelFilter::INFO)
        .with_target("model", LevelFilter::INFO)
        .with_target("planner", LevelFilter::INFO)
        .with_target("runner", LevelFilter::INFO);
    let otel = provider
        .as_ref()
        .map(|provider| tracing_opentelemetry::layer().with_tracer(provider.tracer("runner")).with_filter(ours));
    model::spans::include_content(std::env::var(CONTENT).is_ok_and(|v| v == "1"));
    tracing_subscriber::registry().with(stderr).with(otel).init();
    Telemetry { provider }
}

/// The OTLP/HTTP exporter `OTEL_EXPORTER_OTLP_ENDPOINT` asks for, if it is set; the protocol
/// is `OTEL_EXPORTER_OTLP_PROTOCOL`'s (`http/protobuf`, the default, or `http/json`).
fn exporter() -> Result<Option<SdkTracerProvider>, String> {
    if std::env::var(ENDPOINT).map_or(true, |endpoint| endpoint.trim().is_empty()) {
        return Ok(None);
    }
    let protocol = match std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL").as_deref() {
        Ok("http/json") => Protocol::HttpJson,
        Ok("http/protobuf") | Err(_) => Protocol::HttpBinary,
        Ok(other) => {
            return Err(format!("OTEL_EXPORTER_OTLP_PROTOCOL is `{other}`; runner speaks http/protobuf and http/json"));
        }
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(protocol)
        .build()
        .map_err(|error| error.to_string())?;
    let resource = Resource::builder().with_service_name("runner").build();
    let exporter = Reporting { inner: exporter, warned: AtomicBool::new(false) };
    Ok(Some(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build()))
}

/// The OTLP exporter, saying on stderr (once) when spans cannot be exported: a collector that
/// is down or misnamed would otherwise lose the trace without a word.
#[derive(Debug)]
struct Reporting {
    inner: opentelemetry_otlp::SpanExporter,
    warned: AtomicBool,
}

impl SpanExporter for Reporting {
    fn export(&self, batch: Vec<SpanData>) -> impl Future<Output = OTelSdkResult> + Send {
        let export = self.inner.export(batch);
        async move {
            let result = export.await;
            if let Err(error) = &result
                && !self.warned.swap(true, Ordering::Relaxed)
            {
                eprintln!("warning: spans could not be exported to ${ENDPOINT}: {error}; the run goes on without them");
            }
            result
        }
    }

    fn shutdown_with_timeout(&mut self, timeout: std::time::Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&mut self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The span of a run driven in this process, and, when spans are exported, the W3C
/// `traceparent` a new run records in `RunCreated`. A run created by another process passes
/// the `traceparent` it recorded, and its spans join that trace.
pub fn run_span(run_id: &str, plan: &str, trace: Option<&str>) -> (tracing::Span, Option<String>) {
    let span = engine::spans::run(run_id, plan);
    if let Some(parent) = trace.and_then(parse_traceparent) {
        // Without an exporter there is no OpenTelemetry context to join; nothing is lost.
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(parent));
    }
    let context = span.context();
    let own = context.span().span_context().clone();
    let traceparent =
        own.is_valid().then(|| format!("00-{}-{}-{:02x}", own.trace_id(), own.span_id(), own.trace_flags().to_u8()));
    (span, traceparent)
}

/// Reads a W3C `traceparent` (`00-<trace id>-<span id>-<flags>`); `None` when it is not one.
fn parse_traceparent(text: &str) -> Option<SpanContext> {
    let mut parts = text.split('-');
    let (version, trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if version != "00" || trace.len() != 32 || span.len() != 16 || parts.next().is_some() {
        return None;
    }
    let flags = u8::from_str_radix(flags, 16).ok()?;
    let context = SpanContext::new(
        TraceId::from_hex(trace).ok()?,
        SpanId::from_hex(span).ok()?,
        TraceFlags::new(flags),
        true,
        TraceState::default(),
    );
    context.is_valid().then_some(context)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_is_read_back_and_anything_else_is_not() {
        let context = parse_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").expect("valid");
        assert_eq!(context.trace_id().to_string(), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(context.span_id().to_string(), "b7ad6b7169203331");
        assert!(context.is_sampled() && context.is_remote());
        for bad in [
            "",
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b71692033zz-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad}");
        }
    }
}
