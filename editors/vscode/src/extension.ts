/**
 * The VS Code side of dlm-lsp: starts the server, shows its fills as ghost
 * text, and offers three commands (Fill selection, Rewrite block, Fill holes),
 * a live preview of drafts while a fill denoises, and a status bar item.
 *
 * Everything that can be decided without VS Code (debouncing, version checks,
 * settings, edit application, status text, draft filtering) lives in the small
 * modules beside this one and is unit-tested with node; this file is the glue.
 */

import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as vscode from "vscode";
import {
  CancellationToken,
  CloseAction,
  DidChangeConfigurationNotification,
  type ErrorHandler,
  ExecuteCommandRequest,
  LanguageClient,
  type LanguageClientOptions,
  type MessageSignature,
  MessageType,
  type ProvideCompletionItemsSignature,
  ResponseError,
  type ServerOptions,
  type ShowMessageParams,
  ShowMessageNotification,
  State,
  type StreamInfo,
  TransportKind,
} from "vscode-languageclient/node";

import { type Admission, AfterQuiet, CompletionGate, Debouncer, Handover, InFlight, Keystrokes } from "./debounce";
import { type Launch, Lifecycle } from "./lifecycle";
import { answerAt, reachBack } from "./reach";
import { FIRST_INTERVAL_MS, type Finding, Follower } from "./poll";
import { type Ending, Restarts } from "./restarts";
import { type DraftParams, DraftBoard, draftLabel, draftProgress } from "./drafts";
import { applyEditFailure, applyIfFresh, blankHoleNote, commandDocument, notAppliedNote, holeNear, holesFilled, nothingApplied, primaryOnlyNote, rewriteRange, syntaxWarning, type TextEdit as LspTextEdit, type Range as LspRange } from "./edits";
import { documentSelector, idleReason, languageIds, restartsOnSettingsChange, sendsSettingChange, startsNow, syncedCells, unservedReason } from "./languages";
import {
  hideSecrets, parseAddress, serverCommand, serverSettingKeys, serverSettings, startFailureHint, toggleScope, withToken,
} from "./settings";
import {
  type ClientState, endedWithConnection, failurePopsUp, type FillAnswer, fillLatency, loadFailed, loadFinding, RESTART_HINT, type ServerStatus,
  stateSentence, statusShown, statusText, statusTooltip, suggestionLatency,
} from "./status";
import {
  HeldMessages, isLoadFailureMessage, loadFailureSentence, RETRY_COMMAND, RETRY_LOAD, retryOutcome, retrySetting,
  retryWaitS, statusClick,
} from "./retry";
import { troubleLine, troubleMessage, Troubles } from "./trouble";

const INFILL = "dlm/infill";
const STATUS = "dlm/status";
/** A context key: the language ids the server is started for (package.json's `when`s). */
const LANGUAGES_CONTEXT = "dlm-lsp.languages";
const DRAFT = "dlm/draft";
const FILL_HOLES = "dlm.fillHoles"; // server commands, run through workspace/executeCommand
const REWRITE_SELECTION = "dlm.rewriteSelection";
/** The extension's names of the server commands, as its outcomes are recorded under. */
const COMMAND_NAMES = new Map([[FILL_HOLES, "fillHoles"], [REWRITE_SELECTION, "rewriteBlock"]]);
const REQUEST_CANCELLED = -32800;
const CONTENT_MODIFIED = -32801;
// Client settings whose change needs a new server process.
const RESTART_SETTINGS = ["dlm.server.path", "dlm.server.args", "dlm.server.env",
                          "dlm.server.address", "dlm.server.token", "dlm.languages"];
/** A shared server answers `initialize` at once; past this, it is not going to. */
const SHARED_SERVER_ANSWER_MS = 20000;
/** How long a client setting that restarts the server must keep still before it does. */
const SETTINGS_RESTART_MS = 1000;
/** Idle time before the system starts probing a shared server's connection (keepalive). */
const KEEPALIVE_MS = 15000;
/** How long past `editor.quickSuggestionsDelay` after a change a completion request of kind
 *  Invoke still counts as the change's quick suggestion, not the user's Ctrl+Space.  At 100
 *  ms, a loaded machine (load 6-7 on 2 cores) delivered a quick suggestion later than that in
 *  2 of 9 runs of e2e/run.sh --typing-quick: taken for Ctrl+Space, it began a fill that the
 *  next key stopped.  Too wide costs little: a Ctrl+Space pressed that soon after a key
 *  waits the ghost text's quiet period (`dlm.inline.debounceMs`) before it is sent. */
const QUICK_SUGGESTION_MARGIN_MS = 300;
/** How long a suggestion request VS Code cancelled goes on, for a request of the other
 *  kind at its place sent along with the cancel to take over its fill (`Handover`). */
const HANDOVER_GRACE_MS = 50;
/** How often the client restarts a server that exited, within 3 minutes, before it gives up. */
const MAX_RESTARTS = 4;

/**
 * The language client, quiet while its start is ours to report: a failed start is said
 * once, by the extension, with what to do; the client's own "couldn't create connection
 * to server" beside it only repeated the bare error (it stays in the dlm-lsp output).
 * So is it whenever it is not running: its restarts of a server that exited, which it
 * makes through `start()`, end in words of the extension's (restarts.ts), not in its
 * "Restarting server failed" beside "couldn't create connection to server".
 */
class DlmClient extends LanguageClient {
  quiet = true;
  restarts = new Restarts(() => undefined);
  override error(message: string, data?: unknown, showNotification?: boolean | "force"): void {
    super.error(message, data, this.quiet || this.state !== State.Running ? false : showNotification);
  }
  /** A failed ghost text or completion request is logged, not popped up (`failurePopsUp`). */
  override handleFailedRequest<T>(type: MessageSignature, token: CancellationToken | undefined, error: unknown,
                                  defaultValue: T, showNotification = true, throwOnCancel = false): T {
    return super.handleFailedRequest(type, token, error, defaultValue,
                                     showNotification && failurePopsUp(type.method), throwOnCancel);
  }
  override async start(): Promise<void> {
    try {
      await super.start();
    } catch (error) {
      this.restarts.startFailed(error);
      throw error;
    }
  }
}

/** A command found the server stopped (it exited, and the client gave up restarting it). */
class ServerStopped extends Error {}
/** The failure was already said (a failed start); the command adds nothing. */
class AlreadyReported extends Error {}

interface InfillResult {
  version?: number | null;
  edits: LspTextEdit[];
  /** why there is no edit: every candidate was whitespace in place of code */
  message?: string;
  candidates?: { text: string; valid: boolean }[];
  stats?: { ms?: number; steps?: number; tokens?: number; kind?: string; path?: string };
}

interface CommandResult {
  applied?: boolean;
  holes?: number;
  blank?: number;
  version?: number;
  message?: string;
  fills?: string[];
  text?: string;
  valid?: boolean | null | (boolean | null)[];
}

let extension: DlmExtension | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  extension = new DlmExtension(context);
  context.subscriptions.push(extension);
  // activated at startup too (onStartupFinished: a language added to dlm.languages has no
  // onLanguage event), so the server starts only once an open document is its own
  extension.wake();
}

export async function deactivate(): Promise<void> {
  await extension?.stop();
}

class DlmExtension implements vscode.Disposable {
  private readonly lifecycle: Lifecycle<DlmClient>;
  /** What the start in progress starts, for its failure message. */
  private launching: { address: string; what: string; command: string; args: string[] } =
    { address: "", what: "", command: "", args: [] };
  private state: ClientState = "idle";
  private status: ServerStatus | undefined;
  /** When `status` was answered: a failed load's `loadRetryS` counts down from then. */
  private statusAt = 0;
  /** Re-renders the status bar each second while a failed load counts down to its next try. */
  private countdown: ReturnType<typeof setTimeout> | undefined;
  /** A DLM: Retry loading the model is out: the status bar says "loading" meanwhile. */
  private retrying = false;
  /** The server's error messages while a retry is out (retry.ts). */
  private readonly heldMessages = new HeldMessages();
  /** Why suggestions fail, where the status does not say (trouble.ts). */
  private readonly troubles = new Troubles();
  private lastMs: number | undefined;
  /** what was wrong with dlm.languages when it was last read: said once (`languages`) */
  private languagesProblem: string | undefined;
  private statusTimer: ReturnType<typeof setTimeout> | undefined;
  /** Asks dlm/status until the model's load has ended (its own timer: a one-off
   *  refresh after a fill must not end it, as it did when they shared one). */
  private readonly load = new Follower(() => this.loadEnded());
  private readonly output = vscode.window.createOutputChannel("dlm-lsp", { log: true });
  private readonly statusItem = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
  /** The documents (URIs) a fill command was refused in: an idle status item shows there
   *  (status.statusShown), so that its click can say why. */
  private readonly refused = new Set<string>();
  private readonly debouncer = new Debouncer(() => this.config().get<number>("inline.debounceMs", 250));
  private readonly keystrokes = new Keystrokes(() => vscode.workspace.getConfiguration("editor")
    .get<number>("quickSuggestionsDelay", 10) + QUICK_SUGGESTION_MARGIN_MS);
  /** Completion requests made for typing wait out the ghost text's quiet period. */
  private readonly completionGate = new CompletionGate(
    this.keystrokes, new Debouncer(() => this.config().get<number>("inline.debounceMs", 250)));
  private readonly inFlight = new InFlight<vscode.CancellationTokenSource>();
  /** One fill for a ghost text and a completion request of the same place. */
  private readonly handover = new Handover<vscode.CancellationTokenSource>(HANDOVER_GRACE_MS);
  private readonly drafts = new DraftBoard();
  private readonly serverKeys: string[];
  private readonly draftDecoration = vscode.window.createTextEditorDecorationType({
    after: { color: new vscode.ThemeColor("editorGhostText.foreground"), fontStyle: "italic", margin: "0 0 0 0.5em" },
  });
  private readonly replacedDecoration = vscode.window.createTextEditorDecorationType({ opacity: "0.45" });
  private readonly disposables: vscode.Disposable[] = [];
  /** Restarts for changed client settings, once they stop changing (a second). */
  private readonly settingsRestart = new AfterQuiet(SETTINGS_RESTART_MS);
  /** The dlm-lsp output as the client's message trace writes it: its tokens hidden. */
  private readonly traceOutput = new Proxy(this.output, {
    get: (target, name) => {
      if (name === "trace") return (message: string, ...rest: unknown[]) => target.trace(hideSecrets(message), ...rest);
      const value: unknown = Reflect.get(target, name);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  /** With DLM_LSP_E2E_LOG set (end-to-end tests only), outcomes are appended there as JSON lines. */
  private readonly e2eLog = process.env.DLM_LSP_E2E_LOG;

  constructor(context: vscode.ExtensionContext) {
    this.serverKeys = serverSettingKeys(context.extension.packageJSON);
    this.lifecycle = new Lifecycle(() => this.launch(), {
      started: (client) => this.started(client),
      failed: (error) => this.startFailed(error),
    });
    this.render();
    this.offerCommands();
    const command = (id: string, run: () => Promise<unknown>) =>
      vscode.commands.registerCommand(id, () => run().catch((error) => this.reportError(id, error)));
    this.disposables.push(
      this.output, this.statusItem, this.draftDecoration, this.replacedDecoration,
      command("dlm-lsp.fillSelection", () => this.fillSelection()),
      command("dlm-lsp.rewriteBlock", () => this.rewriteBlock()),
      command("dlm-lsp.fillHoles", () => this.fillHoles()),
      command("dlm-lsp.restartServer", () => this.restart()),
      command("dlm-lsp.showStatus", () => this.showStatus()),
      command("dlm-lsp.toggleInline", () => this.toggleInline()),
      command("dlm-lsp.retryLoad", () => this.retryLoad()),
      vscode.workspace.onDidChangeConfiguration((e) => this.configurationChanged(e)),
      vscode.workspace.onDidOpenTextDocument(() => this.wake()),
      vscode.workspace.onDidChangeTextDocument((e) => {
        // a save changes the dirty state only: no keystroke
        if (e.contentChanges.length > 0) this.keystrokes.typed(e.document.uri.toString());
        this.documentChanged(e.document);
      }),
      vscode.workspace.onDidCloseTextDocument((d) => this.documentClosed(d)),
      vscode.window.onDidChangeActiveTextEditor(() => this.render()),
    );
    this.record("activated", {});
  }

  dispose(): void {
    this.settingsRestart.cancel();
    if (this.statusTimer) clearTimeout(this.statusTimer);
    if (this.countdown) clearTimeout(this.countdown);
    this.load.stop();
    for (const d of this.disposables) d.dispose();
  }

  private config(): vscode.WorkspaceConfiguration {
    return vscode.workspace.getConfiguration("dlm");
  }

  private languages(): string[] {
    const setting = this.config().inspect<unknown>("languages");
    const { ids, problem } = languageIds(this.config().get<unknown>("languages", setting?.defaultValue ?? []),
                                         (setting?.defaultValue as string[] | undefined) ?? []);
    if (problem && problem !== this.languagesProblem) {  // once per wrong value, not per call
      void vscode.window.showWarningMessage(`dlm-lsp: ${problem}.`);
      this.output.warn(problem);
    }
    this.languagesProblem = problem;
    return ids;
  }

  /** The editor's context menu and key offer the fill commands only where the server is (or
   *  starts, for them): elsewhere they could only fail ("document ... is not open"). */
  private offerCommands(): void {
    const languages = this.languages();
    void vscode.commands.executeCommand("setContext", LANGUAGES_CONTEXT, languages);
  }

  // ---- the server process ------------------------------------------------------------------

  /** Start the language client (once; concurrent callers share the start). */
  start(): Promise<LanguageClient | undefined> {
    return this.lifecycle.start();
  }

  /** Start the server if it was never started and an open document is now its own. */
  wake(): void {
    // not awaited: VS Code holds the extension's commands until activate() returns, and a
    // start can take long or hang (DLM: Restart server must work meanwhile); the commands
    // that need the server wait for the start themselves
    if (startsNow(this.state, this.languages(), vscode.workspace.textDocuments)) void this.start();
  }

  private get client(): DlmClient | undefined {
    return this.lifecycle.client;
  }

  /** The next client, not started yet; undefined (and said) when the settings cannot make one. */
  private launch(): Launch<DlmClient> | undefined {
    const config = this.config();
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    const { command, args } = serverCommand(config.get<string>("server.path", "dlm-lsp"),
                                            config.get<string[]>("server.args", []), folder, os.homedir());
    const env = { ...process.env, ...config.get<Record<string, string>>("server.env", {}) };
    const address = config.get<string>("server.address", "").trim();
    let serverOptions: ServerOptions = { command, args, transport: TransportKind.stdio, options: { env } };
    let what = `${command} ${args.join(" ")}`;
    let socket: net.Socket | undefined;
    let abandoned = false;
    if (address) {  // a shared `dlm-lsp --tcp` server: connect instead of starting one
      const parsed = parseAddress(address);
      if ("error" in parsed) {
        this.setState("failed");
        void vscode.window.showErrorMessage(`dlm-lsp: ${parsed.error}`);
        return undefined;
      }
      serverOptions = () => new Promise<StreamInfo>((resolve, reject) => {
        if (abandoned) return reject(new Error("abandoned"));
        socket = net.connect(parsed.port, parsed.host);
        // a host that drops packets held a reconnect (the client's own, after the server
        // closed the connection) at "starting" for about two minutes, and a peer gone
        // without a word (a network drop, the host asleep) left every request waiting
        // for good: the connect has the first start's deadline, and the socket keepalive
        const connecting = socket;
        connecting.setTimeout(SHARED_SERVER_ANSWER_MS, () => connecting.destroy(
          new Error(`no connection to ${address} in ${SHARED_SERVER_ANSWER_MS / 1000} s`)));
        connecting.once("connect", () => {
          connecting.setTimeout(0);
          connecting.setKeepAlive(true, KEEPALIVE_MS);
          resolve({ reader: connecting, writer: connecting });
        });
        connecting.once("error", reject);
        connecting.once("close", () => reject(new Error(`the connection to ${address} closed`)));
      });
      what = `a connection to ${parsed.host}:${parsed.port}`;
    }
    this.launching = { address, what, command, args };
    let fallback: ErrorHandler | undefined;  // the client's own, made once the client exists
    let client: DlmClient | undefined;
    const clientOptions: LanguageClientOptions = {
      documentSelector: documentSelector(this.languages()),
      // a notebook's cells go as one notebook document (LSP 3.17), its code cells of dlm.languages
      notebookDocumentOptions: { filterCells: (_notebook, cells) => syncedCells(this.languages(), cells) },
      // read at each `initialize`: the client restarts a crashed server itself, and an
      // object made here gave the new process the settings of this launch, not the ones
      // changed since (a new `dlm.model` whose load was killed loaded the old one again)
      initializationOptions: () => withToken(this.serverSettings(), address,
                                             config.get<string>("server.token", ""), process.env),
      outputChannel: this.output,
      traceOutputChannel: this.traceOutput,
      // a refused `initialize` (a shared server's token) is reported below, with what to do;
      // the client's own popup would repeat the bare message ...
      initializationFailedHandler: () => false,
      // ... and the connection the server then closes is no crash: restarting would only be
      // refused again (and say "Restarting server failed").  Once running, the usual restarts,
      // whose end (given up, or a restart that failed) the extension says (restarts.ts).
      errorHandler: {
        error: (error, message, count) => fallback!.error(error, message, count),
        closed: async () => {
          if (client?.state !== State.Running) return { action: CloseAction.DoNotRestart, handled: true };
          const decision = await fallback!.closed();
          const restart = client.restarts.closed(decision.action === CloseAction.Restart);
          return { action: restart ? CloseAction.Restart : CloseAction.DoNotRestart, handled: true };
        },
      },
      middleware: {
        provideInlineCompletionItems: (document, position, context, token, next) =>
          this.inlineCompletion(document, position, context, token, next),
        provideCompletionItem: (document, position, context, token, next) =>
          this.completion(document, position, context, token, next),
        executeCommand: (command, args, next) => this.codeActionCommand(command, args, next),
        workspace: {
          // the client answers a refused edit `{applied: false}` with no reason, and the
          // server's commands pass on the editor's `failureReason` to be shown
          handleApplyEdit: async (params, next) => {
            const answer = await next(params, CancellationToken.None);
            if (answer instanceof ResponseError || answer.applied || answer.failureReason) return answer;
            const versions = new Map(vscode.workspace.textDocuments.map((d) => [d.uri.toString(), d.version]));
            const uri = (raw: string) => client!.protocol2CodeConverter.asUri(raw).toString();
            return { ...answer, failureReason: applyEditFailure(params.edit, (raw) => versions.get(uri(raw))) };
          },
        },
      },
    };
    client = new DlmClient("dlm", "dlm-lsp", serverOptions, clientOptions);
    client.restarts = new Restarts((ending) => this.restartEnded(ending));
    fallback = client.createDefaultErrorHandler(MAX_RESTARTS);
    // Inline completion is LSP 3.18; older client versions keep it among the proposed features.
    client.registerProposedFeatures();
    client.onNotification(DRAFT, (params: DraftParams) => this.showDraft(params));
    // in place of the client's own (registered after it, so it replaces it): a Retry on
    // the server's notice of a failed load, and none said twice by a retry (retry.ts)
    client.onNotification(ShowMessageNotification.type, (params) => void this.serverMessage(params));
    const self = client;
    client.onDidChangeState((e) => {
      if (this.client !== self) return;  // its start is not over, or it was replaced
      if (e.newState === State.Running) {
        // the client restarted a server that exited: a new process, loading its model again
        self.restarts.running();
        this.status = undefined;
        this.lastMs = undefined;  // the last fill's latency was the old process's
        this.troubles.reset();
        this.setState("running");
        this.load.follow(100);
      } else {
        this.load.stop();
        // a restart of the client's own that failed is "failed", also once its process is
        // gone (the client then goes on from StartFailed to Stopped)
        if (e.newState === State.Starting) this.setState("starting");
        else if (e.newState === State.StartFailed) this.setState("failed");
        else if (this.state !== "failed") this.setState("stopped");
      }
    });
    this.output.info(`starting ${what}`);
    this.record("launching", { what });
    this.setState("starting");
    return {
      client,
      // a start in progress cannot be stopped: end its connection, and it fails
      abandon: () => {
        abandoned = true;
        if (socket) socket.destroy();
        else self.serverProcess?.kill();
      },
      deadlineMs: address ? SHARED_SERVER_ANSWER_MS : undefined,
    };
  }

  private started(client: DlmClient): void {
    client.quiet = false;
    this.status = undefined;
    this.lastMs = undefined;  // a new server: "fills: 0" beside an old fill's latency misled
    this.troubles.reset();
    this.setState("running");
    this.record("serverStarted", { command: this.launching.command, args: this.launching.args });
    this.load.follow(100);
  }

  private startFailed(error: unknown): void {
    const { address, what, command } = this.launching;
    this.setState("failed");
    this.record("serverFailed", { message: String(error) });
    this.output.error(`could not start ${what}: ${messageOf(error)}`);
    const open = "Open settings";
    const hint = startFailureHint(address, error);
    void vscode.window.showErrorMessage(
      `dlm-lsp could not start ${address ? what : `"${command}"`}: ${messageOf(error)}. ${hint}`,
      open).then((choice) => {
      if (choice === open) void vscode.commands.executeCommand("workbench.action.openSettings", "dlm.server");
    });
  }

  /** The client's own restarting of a server that exited ended badly: said once, here,
   *  with the way back (the client's own words for it are kept to the output). */
  private restartEnded(ending: Ending): void {
    const error = ending.kind === "restartFailed" ? ending.error : undefined;
    this.record("restartEnded", { kind: ending.kind, message: messageOf(error ?? ""),
                                  code: (error as { code?: unknown } | undefined)?.code });
    const { address, what, command } = this.launching;
    const exited = address ? `the connection to ${address} closed` : "the server exited";
    const restart = "Restart server";
    let text: string;
    if (ending.kind === "gaveUp") {
      text = `dlm-lsp: ${exited} ${MAX_RESTARTS + 1} times in 3 minutes; no more automatic restarts `
        + `(the dlm-lsp output says why). ${RESTART_HINT}.`;
    } else if (ending.kind === "neverLoaded") {
      text = `dlm-lsp: ${exited} ${ending.exits} times in a row before its model loaded (out of memory? `
        + `the dlm-lsp output says why); no more automatic restarts. ${RESTART_HINT}.`;
    } else {
      text = `dlm-lsp: ${exited}, and starting ${address ? what : `"${command}"`} again failed: `
        + `${messageOf(ending.error)}. ${startFailureHint(address, ending.error)}`;
    }
    this.output.error(text);
    void vscode.window.showErrorMessage(text, restart).then((choice) => {
      if (choice === restart) void vscode.commands.executeCommand("dlm-lsp.restartServer");
    });
  }

  async stop(): Promise<void> {
    // requests still waiting on it fail as it stops: nothing the user must be told
    if (this.client) {
      this.client.quiet = true;
      this.client.restarts.stopped();
    }
    this.load.stop();
    await this.lifecycle.stop();
    this.setState("stopped");
  }

  private async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  private async readyClient(): Promise<LanguageClient> {
    const client = this.client ?? (await this.start());
    if (!client) throw new AlreadyReported("the dlm-lsp server could not start");
    // a server that exited for good (the client restarts it a few times, then gives up):
    // "Client is not running" would leave the user no way back
    if (client.state !== State.Running && client.state !== State.Starting) {
      throw new ServerStopped("the dlm-lsp server has stopped (its output says why)");
    }
    return client;
  }

  private serverSettings(): Record<string, unknown> {
    const config = this.config();
    return serverSettings(this.serverKeys, (key) => config.get(key));
  }

  private configurationChanged(event: vscode.ConfigurationChangeEvent): void {
    if (!event.affectsConfiguration("dlm")) return;
    if (event.affectsConfiguration("dlm.inline.enabled")) this.render();
    if (event.affectsConfiguration("dlm.languages")) {
      this.offerCommands();
      this.render();  // the active document may be the server's now, or no longer
    }
    if (RESTART_SETTINGS.some((key) => event.affectsConfiguration(key))) {
      // once the setting has stopped changing (AfterQuiet); an idle server stays so,
      // unless the change made an open document its own
      this.settingsRestart.call(() => {
        if (restartsOnSettingsChange(this.state, this.languages(), vscode.workspace.textDocuments)) {
          void this.restart();
        }
      });
      return;
    }
    if (!this.serverKeys.some((key) => event.affectsConfiguration(`dlm.${key}`))) return;
    if (!sendsSettingChange(this.state)) return;
    // the client of a start under way once it has started (the same start: not another)
    void this.lifecycle.whenStarted()?.then(async (client) => {
      if (!client) return;  // its start failed, and said so
      await client.sendNotification(DidChangeConfigurationNotification.type,
                                    { settings: { dlm: this.serverSettings() } });
      this.troubles.reset();  // a longer timeoutMs, another device: failures are news again
      this.render();
      this.load.follow(500);  // a new model loads: show it loading, then loaded or failed
    }).catch((error: unknown) => this.output.warn(`the changed settings were not sent: ${messageOf(error)}`));
  }

  // ---- ghost text --------------------------------------------------------------------------

  /**
   * Inline completions go through the language client's own provider; this
   * middleware adds what typing needs: automatic requests wait for a pause
   * (`dlm.inline.debounceMs`), and a request still in flight for the document
   * is cancelled when a newer one goes out (VS Code cancels superseded tokens
   * too; the server also drops superseded fills between steps).
   */
  private async inlineCompletion(document: vscode.TextDocument, position: vscode.Position,
                                 context: vscode.InlineCompletionContext, token: vscode.CancellationToken,
                                 next: (document: vscode.TextDocument, position: vscode.Position,
                                        context: vscode.InlineCompletionContext,
                                        token: vscode.CancellationToken) => vscode.ProviderResult<
                                   vscode.InlineCompletionItem[] | vscode.InlineCompletionList>,
  ): Promise<vscode.InlineCompletionItem[] | vscode.InlineCompletionList | null | undefined> {
    if (!this.config().get<boolean>("inline.enabled", true)) return null;
    const automatic = context.triggerKind === vscode.InlineCompletionTriggerKind.Automatic;
    if (automatic && !(await this.debouncer.wait(token))) return null;
    const key = document.uri.toString();
    // with a completion item selected, the fill is another than a completion request's
    const at = context.selectedCompletionInfo ? undefined : place(document, position);
    if (at !== undefined) {
      await this.handover.waitFor(key, at, token);  // a completion request's fill of this place
      if (token.isCancellationRequested) return null;
    }
    const source = new vscode.CancellationTokenSource();
    if (at !== undefined) this.handover.begin(key, at, source);
    const forward = token.onCancellationRequested(() => this.handover.cancel(key, source));
    this.inFlight.beginSuggestion(key, source);
    this.render();  // the icon spins while a suggestion is computed
    const started = Date.now();
    try {
      const result = await Promise.resolve(next(document, position, context, source.token))
        .catch((error: unknown) => this.suggestionFailed(error));
      if (!this.config().get<boolean>("inline.enabled", true)) return null;  // turned off meanwhile
      if (!source.token.isCancellationRequested) {
        if (result) this.troubles.succeeded();  // null: the client's answer to a fill stopped by a change
        const items = Array.isArray(result) ? result.length : result?.items.length ?? 0;
        this.lastMs = suggestionLatency(items, Date.now() - started) ?? this.lastMs;
        this.scheduleStatus(200);
      }
      return result;
    } finally {
      forward.dispose();
      this.inFlight.end(key, source);
      this.handover.end(key, source);
      source.dispose();
      this.clearDraft(key);
      this.render();
    }
  }

  /**
   * Completion items (the suggest widget's) go through the language client's own provider;
   * this middleware makes one with the ghost text's request of the same place: whichever
   * goes second waits for the first's fill, which the server answers it from (`Handover`).
   * A request made for typing first waits until typing pauses, so a burst of keystrokes
   * sends one; one the user asked for (Ctrl+Space) goes at once (`CompletionGate`).  A
   * request the user typed past meanwhile (VS Code asks nothing more while one waits) is
   * answered for the cursor, its items' ranges reaching back to where it was asked
   * (reach.ts); so is one whose answer came back empty because typing went on during its
   * fill (the server stops the fill at a change).
   */
  private async completion(document: vscode.TextDocument, position: vscode.Position,
                           context: vscode.CompletionContext, token: vscode.CancellationToken,
                           next: ProvideCompletionItemsSignature,
  ): Promise<vscode.CompletionItem[] | vscode.CompletionList | null | undefined> {
    const key = document.uri.toString();
    // not awaited unless it waits: `waitFor` must come before any cancel VS Code sent along
    const admitted = this.completionGate.admit(key, context.triggerKind, () => document.version, token);
    let admission: Admission = admitted === true ? "asked" : await admitted;
    let at = position;
    while (admission) {
      if (admission === "typedPast") {
        const cursor = answerAt(position, this.cursorIn(document));
        if (!cursor) return null;
        at = new vscode.Position(cursor.line, cursor.character);
      }
      const version = document.version;
      const result = await this.completionAt(key, document, at, context, token, next).catch((error: unknown) => {
        if (document.version === version) throw error;
        return null;  // stopped by the change
      });
      if (token.isCancellationRequested) return null;
      if (!CompletionGate.askAgain(itemsOf(result).length, version, document.version)) {
        return at === position ? result : reachedBack(result, position, at);
      }
      // at the cursor once typing pauses: the place asked at is gone, whatever quiet says
      admission = (await this.completionGate.quiet(() => document.version, token)) && "typedPast";
    }
    return null;
  }

  /** The completion request for `at` in `document`, sent once the other kind's request of
   *  that place (if any) has its fill; null when `token` is cancelled first. */
  private async completionAt(key: string, document: vscode.TextDocument, at: vscode.Position,
                             context: vscode.CompletionContext, token: vscode.CancellationToken,
                             next: ProvideCompletionItemsSignature,
  ): Promise<vscode.CompletionItem[] | vscode.CompletionList | null | undefined> {
    const where = place(document, at);
    await this.handover.waitFor(key, where, token);
    if (token.isCancellationRequested) return null;
    const source = new vscode.CancellationTokenSource();
    this.handover.begin(key, where, source);
    const forward = token.onCancellationRequested(() => this.handover.cancel(key, source));
    try {
      const result = await Promise.resolve(next(document, at, context, source.token))
        .catch((error: unknown) => this.suggestionFailed(error));
      if (result && !source.token.isCancellationRequested && this.troubles.succeeded()) this.render();
      return result;
    } finally {
      forward.dispose();
      this.handover.end(key, source);
      source.dispose();
      // its fill's drafts (`dlm.drafts`) showed at the cursor until the next edit where
      // no ghost text request, whose end clears them, ran beside it
      this.clearDraft(key);
    }
  }

  /** A ghost text or completion request failed (not cancelled): nothing popped up
   *  (`failurePopsUp`), so the status bar is asked again, to say what it can ("failed to
   *  load", "unreachable", and to follow a service that is down until it answers); a
   *  failure the status cannot say (timed out, out of memory) is shown as a warning until a
   *  fill succeeds, and said once per cause (trouble.ts).  Rethrown: VS Code shows no
   *  suggestion. */
  private suggestionFailed(error: unknown): never {
    if (!(error instanceof vscode.CancellationError)) {
      const failed = this.troubles.failed(error);
      this.record("suggestionFailed", { message: messageOf(error), code: (error as { code?: unknown } | null | undefined)?.code,
                                        trouble: failed?.trouble.cause, told: failed?.tell });
      this.scheduleStatus(200);
      if (failed) this.render();
      if (failed?.tell) {
        const { text, setting } = troubleMessage(failed.trouble);
        this.output.warn(text);
        const open = "Open settings";
        void vscode.window.showWarningMessage(text, open).then((choice) => {
          if (choice === open) void vscode.commands.executeCommand("workbench.action.openSettings", setting);
        });
      }
    }
    throw error;
  }

  /** The cursor of the active editor if it shows `document` and selects nothing. */
  private cursorIn(document: vscode.TextDocument): vscode.Position | undefined {
    const editor = vscode.window.activeTextEditor;
    if (editor?.document !== document || !editor.selection.isEmpty) return undefined;
    return editor.selection.active;
  }

  // ---- commands ----------------------------------------------------------------------------

  /** The active editor if the server serves its document; else says why (a warning) and
   *  starts nothing: the palette offers the fill commands in every file. */
  private servedEditor(): vscode.TextEditor | undefined {
    const editor = vscode.window.activeTextEditor;
    const why = unservedReason(this.languages(), editor?.document);
    if (why === undefined) return editor;
    void vscode.window.showWarningMessage(`dlm-lsp: ${why}.`);
    if (!editor) return undefined;
    this.refused.add(editor.document.uri.toString());
    this.render();
    this.record("notServed", { reason: why });
    return undefined;
  }

  /** dlm/infill on the selection, the hole at the cursor, or at the cursor; applied only if fresh. */
  private async fillSelection(): Promise<void> {
    const editor = this.servedEditor();
    if (!editor) return;
    const client = await this.readyClient();
    const document = editor.document;
    let range: vscode.Range = editor.selection;
    if (range.isEmpty) {
      const line = document.lineAt(range.start.line).text;
      const hole = holeNear(line, range.start.character, this.config().get<string>("holeMarker", "<FILL>"));
      if (hole) range = new vscode.Range(range.start.line, hole[0], range.start.line, hole[1]);
    }
    const version = document.version;
    const requested: LspRange = client.code2ProtocolConverter.asRange(range);
    const result = await this.request<InfillResult>(client, document, "dlm: filling", (token) =>
      client.sendRequest(INFILL, { textDocument: { uri: document.uri.toString(), version }, range: requested }, token));
    if (!result) return;
    // applied only to `version`: checked after the edits' conversion, with no await
    // before applyEdit, which VS Code refuses once the document moved on (edits.ts)
    const verdict = await applyIfFresh({ version, range: requested }, result, () => document.version,
                                       (edits) => client.protocol2CodeConverter.asTextEdits(edits),
                                       (edits) => {
                                         const edit = new vscode.WorkspaceEdit();
                                         edit.set(document.uri, edits);
                                         return vscode.workspace.applyEdit(edit);
                                       });
    if (!verdict.apply) {
      this.output.info(notAppliedNote(verdict));
      vscode.window.setStatusBarMessage(`dlm: ${notAppliedNote(verdict)}`, 4000);
      this.record("fillSelection", { applied: false, reason: verdict.reason });
      return;
    }
    this.warnIfUnparsed(result.candidates?.[0]?.valid);
    // a hole the model left blank: said as Fill holes says it, not as a fill like any other
    const blank = blankHoleNote(result.edits);
    const note = blank ? `dlm: ${blank}` : primaryOnlyNote(editor.selections.length);
    if (note) vscode.window.setStatusBarMessage(note, 5000);
    this.record("fillSelection", { applied: true, stats: result.stats, text: document.getText(), version: document.version });
  }

  /** dlm.rewriteSelection on the selection (or the cursor's line), grown to the enclosing block. */
  private async rewriteBlock(): Promise<void> {
    const editor = this.servedEditor();
    if (!editor) return;
    const client = await this.readyClient();
    const document = editor.document;
    const block = rewriteRange(editor.selections, (line) => document.lineAt(line).text.length);
    const range = new vscode.Range(block.start.line, block.start.character, block.end.line, block.end.character);
    const expand = this.config().get<boolean>("rewrite.expand", true);
    // the version the range is of: a keystroke that reaches the server first makes it refuse
    // the rewrite (-32801, said like a stale fill) instead of rewriting other text
    const args = [{
      uri: document.uri.toString(), range: client.code2ProtocolConverter.asRange(range), expand,
      version: document.version,
    }];
    await this.serverCommand(client, document, REWRITE_SELECTION, args);
  }

  /** dlm.fillHoles on the active document: the server applies one edit for all holes. */
  private async fillHoles(): Promise<void> {
    const editor = this.servedEditor();
    if (!editor) return;
    const client = await this.readyClient();
    const document = editor.document;
    await this.serverCommand(client, document, FILL_HOLES, [document.uri.toString()]);
  }

  /** A server command (`dlm.fillHoles`, `dlm.rewriteSelection`) on `document`: run with
   *  `request`'s progress and cancel, its outcome said in the status bar. */
  private async serverCommand(client: LanguageClient, document: vscode.TextDocument,
                              command: string, args: unknown[]): Promise<CommandResult | undefined> {
    const holes = command === FILL_HOLES;
    const result = await this.request<CommandResult>(client, document, holes ? "dlm: filling holes" : "dlm: rewriting",
      (token) => client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args }, token));
    const done = !result?.applied ? "" : holes ? holesFilled(result.holes ?? 0, result.blank) : "rewritten";
    this.reportCommand(COMMAND_NAMES.get(command) ?? command, document, result, done);
    return result;
  }

  /**
   * A server command run from one of its code actions (the lightbulb, the Refactor menu),
   * run as the extension's own commands run theirs: with a cancellable progress, the
   * outcome said in the status bar, an error in one line, and the draft preview cleared.
   * Run by the client as it was, a failed fill was its popup "Request
   * workspace/executeCommand failed. Message: ... Code: -32003", and the last draft and
   * the faded selection stayed on screen until the next edit.
   */
  private async codeActionCommand(command: string, args: unknown[],
                                  next: (command: string, args: unknown[]) => vscode.ProviderResult<unknown>,
  ): Promise<unknown> {
    const uri = commandDocument(args);
    const document = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri);
    const client = this.client;
    const name = COMMAND_NAMES.get(command);
    if (!document || !client || !name) return next(command, args);
    try {
      return await this.serverCommand(client, document, command, args);
    } catch (error) {
      this.reportError(name, error);
      return undefined;
    }
  }

  /**
   * Run one explicit request with a cancellable progress notification,
   * cancelling an earlier one for the same document and its ghost text's request
   * (a suggestion asked for meanwhile leaves it running: `InFlight`).  Cancelled or stale
   * answers (-32800, -32801) resolve to undefined: nothing to apply, no error.
   * An answer that says a fill ran is the status bar's "last fill" (`fillLatency`).
   */
  private async request<T extends FillAnswer>(client: LanguageClient, document: vscode.TextDocument, title: string,
                                              send: (token: vscode.CancellationToken) => Promise<T>,
  ): Promise<T | undefined> {
    const key = document.uri.toString();
    const source = new vscode.CancellationTokenSource();
    this.inFlight.beginCommand(key, source);
    this.render();  // the icon spins while a suggestion is computed
    const started = Date.now();
    let userCancelled = false;  // else a newer command for the document cancelled it
    try {
      const answer = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title, cancellable: true },
        (_progress, token) => {
          token.onCancellationRequested(() => {
            userCancelled = true;
            source.cancel();
          });
          return send(source.token);
        });
      const ms = fillLatency(answer, Date.now() - started);
      this.lastMs = ms ?? this.lastMs;
      // a fill works again (rendered below); a Fill holes that found none ran no fill,
      // and cleared a timeout's warning that still held
      if (ms !== undefined) this.troubles.succeeded();
      return answer;
    } catch (error) {
      if (error instanceof ResponseError && (error.code === REQUEST_CANCELLED || error.code === CONTENT_MODIFIED)) {
        this.output.info(`${title}: ${error.message}`);
        // a changed document is said as the extension's own stale check says it: the same
        // event reads the same whichever side noticed it first
        if (error.code === CONTENT_MODIFIED) vscode.window.setStatusBarMessage(`dlm: ${error.message}`, 4000);
        // a second command in the file stops the first (InFlight): its notification went
        // away and its holes stayed unfilled without a word on screen
        else if (!userCancelled && source.token.isCancellationRequested) {
          vscode.window.setStatusBarMessage(`${title} stopped: another command began in this file`, 5000);
        }
        this.record("dropped", { code: error.code, message: error.message });
        return undefined;
      }
      if (error instanceof ResponseError && endedWithConnection(error.code)) {
        this.output.info(`${title}: ${error.message}`);
        vscode.window.setStatusBarMessage("dlm: stopped: the server ended before it answered", 4000);
        this.record("dropped", { code: error.code, message: error.message });
        return undefined;
      }
      throw error;
    } finally {
      this.inFlight.end(key, source);
      source.dispose();
      this.clearDraft(key);
      this.render();
      this.scheduleStatus(200);
    }
  }

  private reportCommand(name: string, document: vscode.TextDocument, result: CommandResult | undefined,
                        done: string): void {
    if (result && !result.applied) {
      const why = result.message ?? "the editor did not apply the edit";
      vscode.window.setStatusBarMessage(`dlm: ${nothingApplied(why)}`, 5000);
    } else if (done) {
      vscode.window.setStatusBarMessage(`dlm: ${done}`, 4000);
    }
    if (result?.applied) this.warnIfUnparsed(result.valid);
    this.record(name, { result, text: document.getText(), version: document.version, uri: document.uri.toString() });
  }

  /** An applied fill that does not parse is said, not left for the user to find. */
  private warnIfUnparsed(valid: CommandResult["valid"]): void {
    const warning = syntaxWarning(valid);
    if (!warning) return;
    this.output.warn(warning);
    void vscode.window.showWarningMessage(`dlm-lsp: ${warning}; Undo takes it back.`);
    this.record("unparsed", { warning });
  }

  private async showStatus(): Promise<void> {
    await this.refreshStatus();
    // a server that is not running has no status: an earlier one's would mislead
    if (this.state === "running") {
      this.output.info(JSON.stringify(this.status ?? {}, null, 2));
      // what the status bar says of it, and the way out
      if (loadFailed(this.status)) {
        this.output.info(loadFailureSentence(this.status, retryWaitS(this.status, this.statusAt, Date.now())));
      }
      if (this.troubles.current) this.output.info(troubleLine(this.troubles.current));
    } else if (this.state === "idle") this.output.info(idleReason(this.languages(), vscode.workspace.textDocuments));
    else this.output.info(stateSentence(this.state));
    this.output.show(true);
  }

  // ---- live draft preview ------------------------------------------------------------------

  private showDraft(params: DraftParams): void {
    const uri = params.textDocument.uri;
    const editors = vscode.window.visibleTextEditors.filter((e) => e.document.uri.toString() === uri);
    if (!editors.length || !this.drafts.accept(params, editors[0].document.version)) return;
    const client = this.client;
    if (!client) return;
    this.record("draft", { step: params.step, steps: params.steps, text: params.text });
    const range = client.protocol2CodeConverter.asRange(params.range);
    const label = `${draftLabel(params.text)}  ${draftProgress(params)}`;
    const hover = new vscode.MarkdownString().appendCodeblock(params.text, editors[0].document.languageId);
    for (const editor of editors) {
      editor.setDecorations(this.draftDecoration, [{
        range: new vscode.Range(range.end, range.end), hoverMessage: hover,
        renderOptions: { after: { contentText: label } },
      }]);
      editor.setDecorations(this.replacedDecoration, range.isEmpty ? [] : [range]);
    }
  }

  private clearDraft(uri: string): void {
    if (!this.drafts.clear(uri)) return;
    for (const editor of vscode.window.visibleTextEditors) {
      if (editor.document.uri.toString() !== uri) continue;
      editor.setDecorations(this.draftDecoration, []);
      editor.setDecorations(this.replacedDecoration, []);
    }
  }

  /** An edit or a close makes a draft wrong; the server stops the fill itself. */
  private documentChanged(document: vscode.TextDocument): void {
    this.clearDraft(document.uri.toString());
  }

  private documentClosed(document: vscode.TextDocument): void {
    this.documentChanged(document);
    this.refused.delete(document.uri.toString());
    this.keystrokes.forget(document.uri.toString());
  }

  // ---- status bar --------------------------------------------------------------------------

  private setState(state: ClientState): void {
    this.state = state;
    this.render();
  }

  private render(): void {
    const inline = this.config().get<boolean>("inline.enabled", true);
    // a retry out is a load under way, whatever the status asked before it says
    const status = this.retrying && this.status ? { ...this.status, loading: true } : this.status;
    const retryInS = this.state === "running" ? retryWaitS(status, this.statusAt, Date.now()) : undefined;
    const more = { retryInS, trouble: this.troubles.current };
    this.statusItem.text = statusText(this.state, status, this.lastMs, inline, this.inFlight.size > 0, more);
    this.statusItem.tooltip = statusTooltip(this.state, status, this.lastMs, inline, more);
    this.statusItem.command = statusClick(this.state, status);
    this.statusItem.backgroundColor = this.state === "running" && more.trouble && status?.loaded
      ? new vscode.ThemeColor("statusBarItem.warningBackground") : undefined;
    if (this.countdown) clearTimeout(this.countdown);
    this.countdown = retryInS ? setTimeout(() => this.render(), 1000) : undefined;
    const active = vscode.window.activeTextEditor?.document;
    if (statusShown(this.state, this.languages(), active, !!active && this.refused.has(active.uri.toString()))) {
      this.statusItem.show();
    } else {
      this.statusItem.hide();
    }
  }

  /**
   * Turn ghost text off or on (`dlm.inline.enabled`, written where it is defined, the
   * user settings by default, so it lasts), as Copilot's toggle does: commands, completion items and the server
   * keep working; ghost text stops, also when asked for (Trigger Inline Suggestion).
   */
  private async toggleInline(): Promise<void> {
    const config = this.config();
    const on = !config.get<boolean>("inline.enabled", true);
    const target = { folder: vscode.ConfigurationTarget.WorkspaceFolder,
                     workspace: vscode.ConfigurationTarget.Workspace,
                     user: vscode.ConfigurationTarget.Global }[
      toggleScope(config.inspect<boolean>("inline.enabled"))];
    await config.update("inline.enabled", on, target);
    if (!on) this.inFlight.cancelSuggestions();  // the server stops those fills at their next step
    void vscode.window.showInformationMessage(`dlm-lsp: inline suggestions ${on ? "on" : "off"}`);
  }

  /** Ask dlm/status once and show it; a service found down (after a fill, on a click) is
   *  followed until it answers again (`load`), so that the status bar sees it come back. */
  private async refreshStatus(): Promise<void> {
    const client = this.client;
    if (!client || this.state !== "running") return;
    try {
      this.status = await client.sendRequest<ServerStatus>(STATUS, {});
      this.statusAt = Date.now();
      if (this.status?.loaded) client.restarts.loaded();
    } catch (error) {
      this.output.warn(`dlm/status failed: ${messageOf(error)}`);
    }
    this.render();
    if (this.client === client && this.state === "running" && loadFinding(this.status) === "down") {
      this.load.keepUp(FIRST_INTERVAL_MS);
    }
  }

  private scheduleStatus(delayMs: number): void {
    if (this.statusTimer) clearTimeout(this.statusTimer);
    this.statusTimer = setTimeout(() => void this.refreshStatus(), delayMs);
  }

  /** One question of `load` (poll.ts): whether the model's load has ended, loaded or
   *  failed, or there is no load to follow (the server is not running): `over`; or the
   *  remote service does not answer (`down`), or the load goes on. */
  private async loadEnded(): Promise<Finding> {
    if (this.state !== "running") return "over";
    await this.refreshStatus();
    if (this.status?.loaded) this.record("modelLoaded", { status: this.status });
    return loadFinding(this.status);
  }

  // ---- a failed load ------------------------------------------------------------------------

  /**
   * DLM: Retry loading the model (`dlm/retryLoad`): the server loads now, not at the first
   * fill after its wait, and answers once the load is over; said either way, a failure
   * with Retry on it.  Meanwhile the status bar says "loading", beside the server's own
   * progress of the load: no notification of the extension's besides.
   */
  private async retryLoad(): Promise<void> {
    const client = await this.readyClient();
    if (this.retrying) return;  // the retry out says how it went
    this.retrying = true;
    this.heldMessages.hold();
    this.render();
    this.record("retryLoad", {});
    const over = (status: ServerStatus | undefined) => {
      this.retrying = false;
      for (const message of this.heldMessages.release(status)) void vscode.window.showErrorMessage(message);
      if (status && this.client === client) {
        this.status = status;
        this.statusAt = Date.now();
      }
      this.render();
    };
    const status = await client.sendRequest<ServerStatus>(RETRY_LOAD, {}).catch((error: unknown) => {
      over(undefined);
      // a server that ended under the retry (a load killed for memory): its restart is
      // said by the client's restarts; "Pending response rejected since connection got
      // disposed" beside it said nothing more
      if (error instanceof ResponseError && endedWithConnection(error.code)) {
        this.output.info(`retry load: ${error.message}`);
        vscode.window.setStatusBarMessage("dlm: retry stopped: the server ended before it answered", 4000);
        return undefined;
      }
      throw error;
    });
    if (!status) return;
    over(status);
    this.record("retried", { status });
    if (status.loaded) (client as DlmClient).restarts.loaded();
    const outcome = retryOutcome(status);
    if (!outcome.failed) {
      this.output.info(outcome.text);
      void vscode.window.showInformationMessage(outcome.text);
      return;
    }
    this.output.error(outcome.text);
    this.offerRetry(outcome.text, retrySetting(status));
  }

  /** An error message of a failed load, with Retry on it (and the settings, where given). */
  private offerRetry(text: string, setting?: string): void {
    const retry = "Retry";
    const open = "Open settings";
    void vscode.window.showErrorMessage(text, ...(setting ? [retry, open] : [retry])).then((choice) => {
      if (choice === retry) void vscode.commands.executeCommand(RETRY_COMMAND);
      if (choice === open) void vscode.commands.executeCommand("workbench.action.openSettings", setting);
    });
  }

  /** The server's `window/showMessage`, shown as the language client shows it, except its
   *  notice of a failed load, which offers the retry, and one a retry out says itself. */
  private async serverMessage({ type, message }: ShowMessageParams): Promise<void> {
    if (type === MessageType.Warning) {
      void vscode.window.showWarningMessage(message);
    } else if (type !== MessageType.Error) {
      void vscode.window.showInformationMessage(message);
    } else if (!this.heldMessages.offer(message)) {
      await this.refreshStatus();  // which error this is; the status bar says so at once, too
      // with Open settings, as a failed retry's: a Retry alone could only fail again
      if (isLoadFailureMessage(message, this.status)) this.offerRetry(message, retrySetting(this.status!));
      else void vscode.window.showErrorMessage(message);
    }
  }

  // ---- reporting ---------------------------------------------------------------------------

  private reportError(command: string, error: unknown): void {
    this.output.error(`${command}: ${messageOf(error)}`);
    this.record("error", { command, message: messageOf(error) });
    if (error instanceof AlreadyReported) return;
    if (error instanceof ServerStopped) {
      const restart = "Restart server";
      void vscode.window.showWarningMessage(`dlm-lsp: ${messageOf(error)}; ${RESTART_HINT}.`, restart)
        .then((choice) => { if (choice === restart) void vscode.commands.executeCommand("dlm-lsp.restartServer"); });
      return;
    }
    void vscode.window.showWarningMessage(`dlm-lsp: ${messageOf(error)}`);
  }

  private record(event: string, data: Record<string, unknown>): void {
    if (!this.e2eLog) return;
    try {
      fs.appendFileSync(this.e2eLog, JSON.stringify({ event, time: Date.now(), ...data }) + "\n");
    } catch (error) {
      this.output.warn(`cannot write ${this.e2eLog}: ${messageOf(error)}`);
    }
  }
}

/** Where a suggestion is asked for: the document's version and the cursor. */
function place(document: vscode.TextDocument, position: vscode.Position): string {
  return `${document.version}:${position.line}:${position.character}`;
}

function itemsOf(result: vscode.CompletionItem[] | vscode.CompletionList | null | undefined): vscode.CompletionItem[] {
  return !result ? [] : Array.isArray(result) ? result : result.items;
}

/** The answer to a completion request for `cursor` as the answer to one VS Code made at
 *  `asked`, earlier in the word: each item's ranges reach back to `asked` (reach.ts); an
 *  item whose range cannot is left out (VS Code would replace other text with it). */
function reachedBack(result: vscode.CompletionItem[] | vscode.CompletionList | null | undefined,
                     asked: vscode.Position, cursor: vscode.Position,
): vscode.CompletionItem[] | vscode.CompletionList | null | undefined {
  const move = (range: vscode.Range) => {
    const span = reachBack(range, asked, cursor);
    return span && new vscode.Range(span.start.line, span.start.character, span.end.line, span.end.character);
  };
  const items = itemsOf(result).filter((item) => {
    const range = item.range;
    if (range === undefined) return true;  // VS Code's own: the word at `asked`
    if (range instanceof vscode.Range) {
      item.range = move(range);
      return item.range !== undefined;
    }
    const inserting = move(range.inserting);
    const replacing = move(range.replacing);
    item.range = inserting && replacing && { inserting, replacing };
    return item.range !== undefined;
  });
  return !result || Array.isArray(result) ? items : new vscode.CompletionList(items, result.isIncomplete);
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
