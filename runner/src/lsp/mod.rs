//! `runner lsp`: a language server over stdio, on rust-analyzer's `lsp-server` (a synchronous
//! message loop; every request needs the document's latest analysis, so there is nothing to run
//! alongside it). It keeps each open plan's text, reads it again a short pause after the last
//! edit, and publishes the loader's and the critic's diagnostics; hover, completion, navigation,
//! rename, the outline and quick fixes answer from the latest reading.

mod actions;
mod analysis;
mod complete;
mod document;
mod hover;
mod navigate;
mod outline;
mod place;
mod publish;
mod transport;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crossbeam_channel::RecvTimeoutError;
use lsp_server::{Connection, ErrorCode, Message, Notification, Request, RequestId, Response};
use lsp_types::notification::{self, Notification as _};
use lsp_types::request::{self, Request as _};
use lsp_types::{
    InitializeParams, OneOf, PositionEncodingKind, RenameOptions, ServerCapabilities, TextDocumentSyncCapability,
    TextDocumentSyncKind, Url,
};

use analysis::{Analysis, Names};
use document::{Document, Encoding};

/// How long the server waits after an edit before reading the document again: edits typed in a
/// burst are read once.
const SETTLE: Duration = Duration::from_millis(50);

/// Runs the server on stdio until the client says `exit`; exit 0 after a `shutdown`, 1 without.
pub fn run() -> anyhow::Result<u8> {
    let (connection, written, threads) = transport::stdio();
    let code = serve(&connection, written)?;
    drop(connection);
    threads.join()?;
    Ok(code)
}

/// Answers one client on a connection, from `initialize` to `exit`; notifications written as
/// JSON go to `written`.
fn serve(connection: &Connection, written: transport::Written) -> anyhow::Result<u8> {
    let (id, params) = connection.initialize_start()?;
    let params: InitializeParams = serde_json::from_value(params).unwrap_or_default();
    let offered = params.capabilities.general.and_then(|g| g.position_encodings).unwrap_or_default();
    let encoding = if offered.contains(&PositionEncodingKind::UTF8) { Encoding::Utf8 } else { Encoding::Utf16 };
    let result = serde_json::json!({
        "capabilities": capabilities(encoding),
        "serverInfo": {"name": "runner", "version": env!("CARGO_PKG_VERSION")},
    });
    // lsp-server's `initialize_finish` also waits for `initialized` and fails on anything else;
    // a client that sends a document first is answered all the same.
    connection.sender.send(Message::Response(Response::new_ok(id, result)))?;
    let mut server = Server { encoding, documents: HashMap::new(), shutdown: false, connection, written };
    server.main_loop()
}

fn capabilities(encoding: Encoding) -> ServerCapabilities {
    ServerCapabilities {
        position_encoding: Some(match encoding {
            Encoding::Utf8 => PositionEncodingKind::UTF8,
            Encoding::Utf16 => PositionEncodingKind::UTF16,
        }),
        text_document_sync: Some(TextDocumentSyncCapability::Kind(TextDocumentSyncKind::INCREMENTAL)),
        hover_provider: Some(lsp_types::HoverProviderCapability::Simple(true)),
        completion_provider: Some(lsp_types::CompletionOptions {
            trigger_characters: Some(vec![".".into(), " ".into(), "[".into(), "-".into()]),
            ..Default::default()
        }),
        definition_provider: Some(OneOf::Left(true)),
        references_provider: Some(OneOf::Left(true)),
        rename_provider: Some(OneOf::Right(RenameOptions {
            prepare_provider: Some(true),
            work_done_progress_options: Default::default(),
        })),
        document_symbol_provider: Some(OneOf::Left(true)),
        code_action_provider: Some(lsp_types::CodeActionProviderCapability::Simple(true)),
        ..Default::default()
    }
}

/// An open document, its latest reading, the names of the last reading that had a plan, and
/// since when an edit waits to be read.
struct Open {
    document: Document,
    analysis: Analysis,
    names: Names,
    edited: Option<Instant>,
}

struct Server<'c> {
    encoding: Encoding,
    documents: HashMap<Url, Open>,
    shutdown: bool,
    connection: &'c Connection,
    written: transport::Written,
}

impl Server<'_> {
    fn main_loop(&mut self) -> anyhow::Result<u8> {
        loop {
            let due = self.documents.values().filter_map(|open| open.edited).min().map(|at| at + SETTLE);
            let wait = due.map_or(Duration::from_secs(3600), |due| due.saturating_duration_since(Instant::now()));
            match self.connection.receiver.recv_timeout(wait) {
                Ok(Message::Request(request)) => self.request(request)?,
                Ok(Message::Notification(note)) if note.method == notification::Exit::METHOD => {
                    return Ok(if self.shutdown { 0 } else { 1 });
                }
                Ok(Message::Notification(note)) => self.notification(note)?,
                Ok(Message::Response(_)) => {}
                Err(RecvTimeoutError::Timeout) => self.settle(false)?,
                Err(RecvTimeoutError::Disconnected) => return Ok(if self.shutdown { 0 } else { 1 }),
            }
        }
    }

    /// Reads again every document whose last edit has settled (every edited one, with `all`),
    /// and publishes its diagnostics.
    fn settle(&mut self, all: bool) -> anyhow::Result<()> {
        let now = Instant::now();
        let due: Vec<Url> = self
            .documents
            .iter()
            .filter(|(_, open)| open.edited.is_some_and(|at| all || at + SETTLE <= now))
            .map(|(uri, _)| uri.clone())
            .collect();
        for uri in due {
            self.analyse(&uri)?;
        }
        Ok(())
    }

    fn analyse(&mut self, uri: &Url) -> anyhow::Result<()> {
        let Some(open) = self.documents.get_mut(uri) else { return Ok(()) };
        let span = tracing::info_span!("analyse", uri = %uri, bytes = open.document.text.len());
        let _entered = span.enter();
        open.analysis = Analysis::new(&open.document.text, path_of(uri).as_deref());
        if let Some(names) = Names::of(&open.analysis) {
            open.names = names;
        }
        open.edited = None;
        let params = publish::diagnostics(uri, &open.document, &open.analysis, self.encoding);
        self.notify::<notification::PublishDiagnostics>(params)
    }

    fn notify<N: notification::Notification>(&self, params: N::Params) -> anyhow::Result<()> {
        self.written.send(transport::notification(N::METHOD, &params)?)?;
        Ok(())
    }

    fn respond(&self, response: Response) -> anyhow::Result<()> {
        self.connection.sender.send(Message::Response(response))?;
        Ok(())
    }

    fn notification(&mut self, note: Notification) -> anyhow::Result<()> {
        match note.method.as_str() {
            notification::DidOpenTextDocument::METHOD => {
                let Ok(params) =
                    note.extract::<lsp_types::DidOpenTextDocumentParams>(notification::DidOpenTextDocument::METHOD)
                else {
                    return Ok(());
                };
                let item = params.text_document;
                let document = Document::new(item.text, item.version);
                // Read at once below; an empty text stands in for an instant.
                let analysis = Analysis::new("", None);
                let open = Open { document, analysis, names: Names::default(), edited: Some(Instant::now()) };
                self.documents.insert(item.uri.clone(), open);
                self.analyse(&item.uri)?;
            }
            notification::DidChangeTextDocument::METHOD => {
                let Ok(params) =
                    note.extract::<lsp_types::DidChangeTextDocumentParams>(notification::DidChangeTextDocument::METHOD)
                else {
                    return Ok(());
                };
                if let Some(open) = self.documents.get_mut(&params.text_document.uri) {
                    for change in params.content_changes {
                        open.document.change(change, self.encoding);
                    }
                    open.document.version = params.text_document.version;
                    open.edited = Some(Instant::now());
                }
            }
            notification::DidCloseTextDocument::METHOD => {
                let Ok(params) =
                    note.extract::<lsp_types::DidCloseTextDocumentParams>(notification::DidCloseTextDocument::METHOD)
                else {
                    return Ok(());
                };
                let uri = params.text_document.uri;
                if self.documents.remove(&uri).is_some() {
                    let cleared = lsp_types::PublishDiagnosticsParams { uri, diagnostics: Vec::new(), version: None };
                    self.notify::<notification::PublishDiagnostics>(cleared)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn request(&mut self, request: Request) -> anyhow::Result<()> {
        let id = request.id.clone();
        if self.shutdown {
            return self.respond(error(id, ErrorCode::InvalidRequest, "the server is shutting down"));
        }
        if request.method == request::Shutdown::METHOD {
            self.shutdown = true;
            return self.respond(Response::new_ok(id, ()));
        }
        // Every answer reads the document as it is now: an edit still settling is read first.
        self.settle(true)?;
        let response = match self.answer(&request) {
            Ok(response) => response,
            Err(Failed::Params(reason)) => error(id, ErrorCode::InvalidParams, &reason),
            Err(Failed::Unknown) => {
                error(id, ErrorCode::MethodNotFound, &format!("`{}` is not supported", request.method))
            }
            Err(Failed::Refused(reason)) => error(id, ErrorCode::RequestFailed, &reason),
        };
        self.respond(response)
    }

    fn answer(&self, request: &Request) -> Result<Response, Failed> {
        let id = request.id.clone();
        let encoding = self.encoding;
        match request.method.as_str() {
            request::HoverRequest::METHOD => {
                let params: lsp_types::HoverParams = params(request)?;
                let at = &params.text_document_position_params;
                let reply = self
                    .at(at)
                    .and_then(|(open, offset)| hover::hover(&open.document, &open.analysis, offset, encoding));
                Ok(Response::new_ok(id, reply))
            }
            request::Completion::METHOD => {
                let params: lsp_types::CompletionParams = params(request)?;
                let at = &params.text_document_position;
                let reply =
                    self.at(at).map(|(open, offset)| complete::complete(&open.document, &open.names, offset, encoding));
                Ok(Response::new_ok(id, reply))
            }
            request::GotoDefinition::METHOD => {
                let params: lsp_types::GotoDefinitionParams = params(request)?;
                let at = &params.text_document_position_params;
                let reply = self.at(at).and_then(|(open, offset)| {
                    navigate::definition(&at.text_document.uri, &open.document, &open.analysis, offset, encoding)
                });
                Ok(Response::new_ok(id, reply))
            }
            request::References::METHOD => {
                let params: lsp_types::ReferenceParams = params(request)?;
                let at = &params.text_document_position;
                let reply = self.at(at).map(|(open, offset)| {
                    let uri = &at.text_document.uri;
                    navigate::references(
                        uri,
                        &open.document,
                        &open.analysis,
                        offset,
                        params.context.include_declaration,
                        encoding,
                    )
                });
                Ok(Response::new_ok(id, reply))
            }
            request::PrepareRenameRequest::METHOD => {
                let params: lsp_types::TextDocumentPositionParams = params(request)?;
                let reply = self.at(&params).and_then(|(open, offset)| {
                    navigate::prepare_rename(&open.document, &open.analysis, offset, encoding)
                });
                Ok(Response::new_ok(id, reply))
            }
            request::Rename::METHOD => {
                let params: lsp_types::RenameParams = params(request)?;
                let at = &params.text_document_position;
                let Some((open, offset)) = self.at(at) else { return Ok(Response::new_ok(id, ())) };
                let uri = &at.text_document.uri;
                let edit = navigate::rename(uri, &open.document, &open.analysis, offset, &params.new_name, encoding)
                    .map_err(Failed::Refused)?;
                Ok(Response::new_ok(id, edit))
            }
            request::DocumentSymbolRequest::METHOD => {
                let params: lsp_types::DocumentSymbolParams = params(request)?;
                let reply = self
                    .documents
                    .get(&params.text_document.uri)
                    .map(|open| outline::symbols(&open.document, &open.analysis, encoding));
                Ok(Response::new_ok(id, reply))
            }
            request::CodeActionRequest::METHOD => {
                let params: lsp_types::CodeActionParams = params(request)?;
                let uri = &params.text_document.uri;
                let reply = self
                    .documents
                    .get(uri)
                    .map(|open| actions::actions(uri, &open.document, &open.analysis, params.range, encoding));
                Ok(Response::new_ok(id, reply))
            }
            _ => Err(Failed::Unknown),
        }
    }

    /// The open document a position is in, and the position's byte offset.
    fn at(&self, at: &lsp_types::TextDocumentPositionParams) -> Option<(&Open, usize)> {
        let open = self.documents.get(&at.text_document.uri)?;
        Some((open, open.document.offset(at.position, self.encoding)))
    }
}

/// Why a request got no answer.
enum Failed {
    /// Its parameters are not what the method takes.
    Params(String),
    /// The method is not one this server answers.
    Unknown,
    /// The request cannot be carried out (a rename to a taken name, say).
    Refused(String),
}

fn params<P: serde::de::DeserializeOwned>(request: &Request) -> Result<P, Failed> {
    serde_json::from_value(request.params.clone()).map_err(|e| Failed::Params(format!("invalid params: {e}")))
}

fn error(id: RequestId, code: ErrorCode, message: &str) -> Response {
    Response::new_err(id, code as i32, message.to_owned())
}

/// The file a `file:` URI names; `None` for other schemes (an unsaved buffer).
fn path_of(uri: &Url) -> Option<PathBuf> {
    (uri.scheme() == "file").then(|| uri.to_file_path().ok()).flatten()
}
