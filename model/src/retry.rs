//! The requests an endpoint makes, each with its retries: unstreamed ones through backon,
//! streamed ones in a loop that stops retrying once text has been handed on.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use tracing::Instrument as _;

use crate::answer::Answer;
use crate::endpoint::Endpoint;
use crate::error::LlmError;
use crate::protocol::{Body, ChatRequest, ChatResponse, Sampling, Usage};
use crate::spans;

/// Tries after the first one, for errors the client retries itself.
const RETRIES: usize = 2;
/// The first wait between tries.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);

impl Endpoint {
    /// One answer for an agent: streamed unless the provider sets `stream: false`, so that
    /// a live server is waited for as long as it sends events and a silent one is given up
    /// after `idle_timeout`. Retries as [`complete_with`](Self::complete_with) does.
    pub async fn answer(&self, request: &ChatRequest<'_>, sampling: Sampling) -> Result<Answer, LlmError> {
        if self.stream {
            return self.stream_answer(request, sampling, None).await;
        }
        let response = self.complete_with(request, sampling).await?;
        let (model, usage) = (response.model, response.usage);
        let choice = response.choices.into_iter().next().ok_or_else(|| LlmError::Malformed {
            provider: self.name.clone(),
            reason: "no choices".to_owned(),
            body: String::new(),
        })?;
        Ok(Answer { message: choice.message, finish_reason: choice.finish_reason, usage, model })
    }

    /// Sends an unstreamed request with sampling settings such as the temperature, retrying
    /// rate limits, server errors, network errors and timeouts (twice, backing off
    /// exponentially from 500 ms or as `Retry-After` says).
    pub async fn complete_with(&self, request: &ChatRequest<'_>, sampling: Sampling) -> Result<ChatResponse, LlmError> {
        let span = spans::model_request(&self.name, request.model, false);
        let result = self.complete_retrying(request, sampling).instrument(span.clone()).await;
        match &result {
            Ok(response) => {
                spans::model_answered(&span, response.model.as_deref(), response.usage.as_ref(), None);
                let text = response.choices.first().and_then(|choice| choice.message.content.as_deref());
                self.record_content(&span, request, text);
            }
            Err(error) => spans::model_answered(&span, None, None, Some(error.class().as_str())),
        }
        result
    }

    async fn complete_retrying(&self, request: &ChatRequest<'_>, sampling: Sampling) -> Result<ChatResponse, LlmError> {
        let body = self.encode(&Body { request, sampling, stream: false, stream_options: None })?;
        let tries = AtomicU32::new(0);
        let backoff = ExponentialBuilder::default()
            .with_min_delay(FIRST_BACKOFF)
            .with_factor(2.0)
            .with_max_times(RETRIES)
            .with_jitter();
        let result = (|| self.send(&body, &tries))
            .retry(backoff)
            .when(LlmError::transient)
            .adjust(|error, delay| delay.map(|delay| error.retry_after().unwrap_or(delay)))
            .await;
        let tries = tries.load(Ordering::SeqCst);
        result.map_err(|error| {
            if tries > 1 && error.transient() { LlmError::Exhausted { last: Box::new(error), tries } } else { error }
        })
    }

    /// One try: waits for the limiter, then sends and reads the answer within the timeout.
    async fn send(&self, body: &[u8], tries: &AtomicU32) -> Result<ChatResponse, LlmError> {
        let _permit = self.limiter.acquire().await;
        tries.fetch_add(1, Ordering::SeqCst);
        match tokio::time::timeout(self.timeout, self.exchange(body)).await {
            Ok(result) => result,
            Err(_) => Err(LlmError::Timeout { provider: self.name.clone(), after: self.timeout }),
        }
    }

    /// Sends a request with `stream: true` and reads the server-sent events, handing each piece
    /// of the answer's text to `on_text` as it arrives; returns the whole text and the usage
    /// when the server reports it. Failures before the first piece are retried as
    /// [`complete_with`](Self::complete_with) retries them; once text has been handed on, a failure
    /// ends the call. A server that ignores `stream` and answers with one JSON completion
    /// is read as well. The provider's `idle_timeout` bounds each wait for an event, its
    /// `timeout` (if set) the whole answer. Texts are not redacted.
    pub async fn complete_streaming(
        &self,
        request: &ChatRequest<'_>,
        sampling: Sampling,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<(String, Option<Usage>), LlmError> {
        let answer = self.stream_answer(request, sampling, Some(on_text)).await?;
        Ok((answer.message.content.unwrap_or_default(), answer.usage))
    }

    /// A streamed answer, retried while nothing has been handed to `on_text`.
    async fn stream_answer(
        &self,
        request: &ChatRequest<'_>,
        sampling: Sampling,
        on_text: Option<&mut (dyn FnMut(&str) + Send)>,
    ) -> Result<Answer, LlmError> {
        let span = spans::model_request(&self.name, request.model, true);
        let result = self.stream_retrying(request, sampling, on_text).instrument(span.clone()).await;
        match &result {
            Ok(answer) => {
                spans::model_answered(&span, answer.model.as_deref(), answer.usage.as_ref(), None);
                self.record_content(&span, request, answer.message.content.as_deref());
            }
            Err(error) => spans::model_answered(&span, None, None, Some(error.class().as_str())),
        }
        result
    }

    /// The conversation and the answer on a model request's span, with the key redacted, when
    /// the operator lets content into spans.
    fn record_content(&self, span: &tracing::Span, request: &ChatRequest<'_>, answer: Option<&str>) {
        let messages = || self.redactor.apply(&serde_json::to_string(request.messages).unwrap_or_default());
        spans::model_content(span, messages, || answer.map(|text| self.redactor.apply(text)));
    }

    async fn stream_retrying(
        &self,
        request: &ChatRequest<'_>,
        sampling: Sampling,
        mut on_text: Option<&mut (dyn FnMut(&str) + Send)>,
    ) -> Result<Answer, LlmError> {
        let stream_options = Some(serde_json::json!({"include_usage": true}));
        let body = self.encode(&Body { request, sampling, stream: true, stream_options })?;
        let mut tries: u32 = 0;
        let mut delay = FIRST_BACKOFF;
        loop {
            tries += 1;
            let mut delivered = false;
            let result = {
                let _permit = self.limiter.acquire().await;
                let mut forward = |piece: &str| {
                    if let Some(on_text) = on_text.as_mut() {
                        delivered = true;
                        on_text(piece);
                    }
                };
                let exchange = self.exchange_streaming(&body, &mut forward);
                match self.stream_timeout {
                    Some(limit) => tokio::time::timeout(limit, exchange)
                        .await
                        .unwrap_or_else(|_| Err(LlmError::Timeout { provider: self.name.clone(), after: limit })),
                    None => exchange.await,
                }
            };
            match result {
                Ok(answer) => return Ok(answer),
                Err(error) if error.transient() && !delivered && tries <= RETRIES as u32 => {
                    tokio::time::sleep(error.retry_after().unwrap_or(delay)).await;
                    delay *= 2;
                }
                Err(error) if tries > 1 && error.transient() => {
                    return Err(LlmError::Exhausted { last: Box::new(error), tries });
                }
                Err(error) => return Err(error),
            }
        }
    }
}
