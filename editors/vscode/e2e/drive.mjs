// The user's part of the end-to-end test, through the Chrome DevTools Protocol:
// wait for the VS Code workbench, open hello.py with Quick Open, run "DLM: Fill
// holes" from the command palette, and check, from what the extension logged,
// that the document changed only inside the <FILL> hole.  Node 22+ (global
// WebSocket and fetch); no dependencies.
//
//   node drive.mjs --cdp PORT --events events.jsonl --fixture hello.py --file ws/hello.py --shots DIR

import { readFileSync, writeFileSync, existsSync, rmSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: {
    cdp: { type: "string" }, events: { type: "string" }, fixture: { type: "string" },
    file: { type: "string" }, shots: { type: "string", default: "." },
    marker: { type: "string", default: "<FILL>" },
    refused: { type: "boolean", default: false },  // the shared server refuses our token
    crash: { type: "string" },  // a folder: the server's pid, and `refuse` to make starts fail
    "late-language": { type: "string" },  // the open file's language, added to dlm.languages late
    settings: { type: "string" },  // the workspace's settings.json (to add it there)
    notebook: { type: "boolean", default: false },  // --file is a notebook, --fixture its cell with the hole
    completion: { type: "string" },  // the server's planted fill, after `ret` on --fixture's blank indented line
    rewrite: { type: "string" },  // the file the server reads its planted fill from, each fill
    typing: { type: "string" },  // the server's log of its fills (tests/scripted_fills.py), beside its gate and fill
    readonly: { type: "boolean", default: false },  // --file is read-only in the editor (files.readonlyInclude)
    "remote-down": { type: "string" },  // the port of dlm.remoteUrl, where nothing listens until the driver does
    "model-missing": { type: "boolean", default: false },  // dlm.model names no model: its load fails
    oom: { type: "boolean", default: false },  // the server's first fill runs out of memory (DLM_LSP_FAULTS)
  },
});

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const log = (...parts) => console.error("[drive]", ...parts);

async function until(what, predicate, timeoutMs, everyMs = 250) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await predicate();
    if (value) return value;
    await sleep(everyMs);
  }
  throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
}

/** A minimal CDP session on one page. */
class Page {
  static async connect(port) {
    const target = await until("the code-server page in Chromium", async () => {
      try {
        const list = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
        return list.find((t) => t.type === "page" && t.url.startsWith("http://127.0.0.1"));
      } catch {
        return undefined;
      }
    }, 60000);
    const page = new Page(new WebSocket(target.webSocketDebuggerUrl));
    await new Promise((resolve, reject) => {
      page.ws.addEventListener("open", resolve, { once: true });
      page.ws.addEventListener("error", reject, { once: true });
    });
    return page;
  }

  constructor(ws) {
    this.ws = ws;
    this.nextId = 1;
    this.pending = new Map();
    ws.addEventListener("message", (event) => {
      const message = JSON.parse(event.data);
      const waiter = this.pending.get(message.id);
      if (!waiter) return;
      this.pending.delete(message.id);
      if (message.error) waiter.reject(new Error(message.error.message));
      else waiter.resolve(message.result);
    });
  }

  send(method, params = {}) {
    const id = this.nextId++;
    this.ws.send(JSON.stringify({ id, method, params }));
    return new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }));
  }

  async evaluate(expression) {
    const { result, exceptionDetails } = await this.send("Runtime.evaluate", { expression, returnByValue: true });
    if (exceptionDetails) throw new Error(exceptionDetails.text);
    return result.value;
  }

  /** Press a key (with modifiers: 1 Alt, 2 Ctrl, 4 Meta, 8 Shift) as a keyboard would. */
  async press(key, code, keyCode, modifiers = 0, text) {
    const common = { key, code, windowsVirtualKeyCode: keyCode, nativeVirtualKeyCode: keyCode, modifiers };
    await this.send("Input.dispatchKeyEvent", { type: text ? "keyDown" : "rawKeyDown", text, ...common });
    await this.send("Input.dispatchKeyEvent", { type: "keyUp", ...common });
  }

  async click(x, y) {
    for (const type of ["mousePressed", "mouseReleased"]) {
      await this.send("Input.dispatchMouseEvent", { type, x, y, button: "left", clickCount: 1 });
    }
  }

  async type(text) {
    await this.send("Input.insertText", { text });
  }

  async screenshot(path) {
    const { data } = await this.send("Page.captureScreenshot", { format: "png" });
    writeFileSync(path, Buffer.from(data, "base64"));
  }
}

function events() {
  if (!existsSync(args.events)) return [];
  return readFileSync(args.events, "utf8").split("\n").filter(Boolean).map((line) => JSON.parse(line));
}

const event = (name) => () => events().find((e) => e.event === name);

/** The checks: the marker is gone and every byte outside it is as it was. */
function check(before, after, result) {
  const problems = [];
  const start = before.indexOf(args.marker);
  const end = start + args.marker.length;
  if (!result?.applied) problems.push(`the edit was not applied: ${JSON.stringify(result)}`);
  if (after.includes(args.marker)) problems.push("the hole is still there");
  if (!after.startsWith(before.slice(0, start))) problems.push("the text before the hole changed");
  if (!after.endsWith(before.slice(end))) problems.push("the text after the hole changed");
  if (after.length < start + before.length - end) problems.push("the document got shorter than its unchanged parts");
  const fill = after.slice(start, after.length - (before.length - end));
  if (result?.fills && result.fills[0] !== fill) problems.push("the document holds another fill than the server's");
  return { problems, fill };
}

async function quickInput(page, openKey) {
  await openKey();
  await until("the quick input", () => page.evaluate(
    "!!document.querySelector('.quick-input-widget') && getComputedStyle(document.querySelector('.quick-input-widget')).display !== 'none'"), 10000);
}

let page; // kept for a screenshot when something fails

/** Run a command from the command palette, as a user would. */
async function palette(title) {
  await quickInput(page, () => page.press("F1", "F1", 112));
  await page.type(title);
  await sleep(1500);
  await page.press("Enter", "Enter", 13, 0, "\r");
}

/** The status bar items of the extension, joined. */
const dlmStatusBar = () => page.evaluate(
  "[...document.querySelectorAll('.statusbar-item')].map(e => e.textContent).filter(t => t.includes('dlm')).join(' | ')");

async function main() {
  page = await Page.connect(args.cdp);
  await page.send("Page.enable");
  await page.send("Runtime.enable");
  await page.send("Page.bringToFront");
  await until("the workbench", () => page.evaluate("!!document.querySelector('.monaco-workbench .part.editor')"), 120000);
  log("workbench up");
  await sleep(2000); // let the workbench finish restoring before typing into it

  // Open the file as a user would: click it in the Explorer.  (Quick Open needs VS Code's
  // file search, whose ripgrep binary code-server downloads at install time: not offline.)
  const name = basename(args.file);
  const activeTab = `(document.querySelector('.tab.active') || {}).textContent || ''`;
  for (let attempt = 1; !(await page.evaluate(activeTab)).includes(name); attempt++) {
    if (attempt > 5) throw new Error(`could not open ${name} from the Explorer`);
    const box = await until(`${name} in the Explorer`, () => page.evaluate(`(() => {
      const row = [...document.querySelectorAll('.explorer-folders-view .monaco-list-row')]
        .find((r) => r.textContent.trim() === ${JSON.stringify(name)});
      if (!row) return null;
      const r = row.getBoundingClientRect();
      return { x: r.x + r.width / 2, y: r.y + r.height / 2 };
    })()`), 30000);
    await page.click(box.x, box.y);
    await sleep(1500);
  }
  log(`${name} open`);

  if (args.refused) return refused();
  if (args["late-language"]) return lateLanguage(args["late-language"]);
  await until("the extension to start the server", event("serverStarted"), 60000, 500);
  if (args["remote-down"]) return remoteDown(Number(args["remote-down"]));
  if (args["model-missing"]) return modelMissing();
  const loaded = await until("the model to load", event("modelLoaded"), 120000, 500);
  if (args.crash) return crashed();
  log(`server up: ${JSON.stringify(loaded.status)}`);
  if (args.notebook) return notebook();
  if (args.completion) return completion(readFileSync(args.completion, "utf8"));
  if (args.rewrite) return rewrite(args.rewrite);
  if (args.typing) return typing(args.typing);
  if (args.readonly) return readonly();
  if (args.oom) return outOfMemory();

  await palette("DLM: Fill holes");
  log("ran DLM: Fill holes");
  const filled = await until("the fill", event("fillHoles"), 90000, 500);

  await sleep(1000); // the status bar refreshes after each fill
  const statusBar = await dlmStatusBar();
  await page.screenshot(join(args.shots, "after-fill.png"));

  const before = readFileSync(args.fixture, "utf8");
  const { problems, fill } = check(before, filled.text, filled.result);
  if (!/dlm: .*cpu|dlm: .*cuda/.test(statusBar)) problems.push(`status bar shows no model/device: "${statusBar}"`);

  // Fill holes again: no hole is left, no fill runs, and the status bar keeps the last
  // fill's latency (it showed the few milliseconds of the command that did nothing).
  await sleep(1500); // anything the fill's edit set off has ended
  // the extension's item (model · device · latency), not the messages beside it ("filled 1 hole")
  const item = async () => (await dlmStatusBar()).split(" | ").filter((t) => /cpu|cuda/.test(t)).join(" | ");
  const statusBarBefore = await item();
  await palette("DLM: Fill holes");
  const again = await until("the second Fill holes", () => events().filter((e) => e.event === "fillHoles")[1],
                            30000, 500).catch((error) => (problems.push(error.message), undefined));
  await sleep(1000);
  const statusBarAgain = await item();
  if (again && again.result?.holes !== 0) problems.push(`a second Fill holes found holes: ${JSON.stringify(again.result)}`);
  if (statusBarAgain !== statusBarBefore) {
    problems.push(`a Fill holes that found none changed the status bar: "${statusBarBefore}" -> "${statusBarAgain}"`);
  }

  // Ghost text: open a new line in the loop of main() (Enter at the end of its `for` line,
  // which VS Code indents), wait for the suggestion, take its first word with Ctrl+Right
  // (VS Code's own editor.action.inlineSuggest.acceptNextWord: the rest stays shown), the
  // rest with Tab, save.  (Typing at the end of the `for` line instead breaks the line
  // below it, which no single-line fill can mend: the server then finds no valid fill.)
  const lines = filled.text.split("\n");
  const row = lines.findIndex((line) => line.includes("for i in range(10):"));
  await quickInput(page, () => page.press("g", "KeyG", 71, 2)); // Go to Line
  await page.type(String(row + 1));
  await page.press("Enter", "Enter", 13, 0, "\r");
  await sleep(500);
  await page.press("End", "End", 35);
  await page.press("Enter", "Enter", 13, 0, "\r");
  // the suggestion's pieces in reading order (the DOM holds its later lines before its first)
  const shown = `[...document.querySelectorAll('.ghost-text-decoration, .ghost-text')]
    .map(e => [e.getBoundingClientRect(), e.textContent])
    .sort(([a], [b]) => a.top - b.top || a.left - b.left).map(([, t]) => t).join('')`;
  const bare = (text) => text.replace(/[\s\u00a0]/g, ""); // the DOM joins lines and shows spaces as nbsp
  let ghost = "";
  try {
    ghost = await until("ghost text", () => page.evaluate(shown), 30000);
  } catch (error) {
    problems.push(error.message);
  }
  await page.screenshot(join(args.shots, "ghost-text.png"));
  let current = filled.text;
  let partly = "";
  if (ghost) {
    await page.press("ArrowRight", "ArrowRight", 39, 2);
    partly = await until("the rest of the suggestion after Ctrl+Right", async () => {
      const left = await page.evaluate(shown);
      return left && bare(left) !== bare(ghost) && left;
    }, 10000).catch((error) => (problems.push(error.message), ""));
    if (partly && !bare(ghost).endsWith(bare(partly))) {
      problems.push(`after Ctrl+Right the ghost text ${JSON.stringify(partly)} is not the rest of ${JSON.stringify(ghost)}`);
    }
    await page.screenshot(join(args.shots, "ghost-text-partly-accepted.png"));
    await page.press("Tab", "Tab", 9);
    // Accepting is asynchronous in VS Code: save until the file holds the whole suggestion
    // on the new line, between the `for` line and the rest.
    const head = lines.slice(0, row + 1).join("\n") + "\n";
    const rest = "\n" + lines.slice(row + 1).join("\n");
    const middle = (text) => text.startsWith(head) && text.endsWith(rest)
      ? text.slice(head.length, text.length - rest.length) : null;
    const saved = await until("the accepted suggestion in the saved file", async () => {
      await page.press("s", "KeyS", 83, 2);
      await sleep(300);
      const text = readFileSync(args.file, "utf8");
      const added = middle(text);
      return added !== null && bare(added) === bare(ghost) && text;
    }, 15000, 700).catch((error) => (problems.push(error.message), ""));
    if (!saved) {
      problems.push(`the saved file does not hold the suggestion on the new line: ${JSON.stringify(readFileSync(args.file, "utf8"))}`);
    }
    current = saved || current;
  }

  // Fill selection at the cursor (end of the last line), with the live draft preview on.
  const last = current.replace(/\n+$/, "").split("\n").length;
  await quickInput(page, () => page.press("g", "KeyG", 71, 2));
  await page.type(String(last));
  await page.press("Enter", "Enter", 13, 0, "\r");
  await sleep(500);
  await page.press("End", "End", 35);
  await page.press("Escape", "Escape", 27); // no ghost text in the way
  const asked = Date.now();
  await palette("DLM: Fill selection");
  const selected = await until("Fill selection", event("fillSelection"), 60000, 500).catch((error) => {
    problems.push(error.message);
  });
  let inserted;
  if (selected) {
    const lines2 = current.split("\n");
    const head = lines2.slice(0, last).join("\n");
    const tail = current.slice(head.length);
    if (!selected.applied || !selected.text.startsWith(head) || !selected.text.endsWith(tail)) {
      problems.push(`Fill selection did not insert only at the cursor: ${JSON.stringify(selected)}`);
    }
    inserted = selected.text.slice(head.length, selected.text.length - tail.length);
    const previews = events().filter((e) => e.event === "draft" && e.time >= asked && e.time <= selected.time);
    if (!previews.length) problems.push("no draft was previewed while Fill selection denoised");
  }

  // Pause ghost text from the palette: the status bar says so, and a new line (where the
  // ghost text above appeared) shows none; then resume it.
  await palette("DLM: Toggle inline suggestions");
  const paused = await until("the status bar to say suggestions are off", async () => {
    const text = await dlmStatusBar();
    return /suggestions off/.test(text) && text;
  }, 10000).catch((error) => (problems.push(error.message), ""));
  await page.press("Enter", "Enter", 13, 0, "\r");
  await sleep(4000); // the debounce and a whole fill, many times over
  const ghostWhilePaused = await page.evaluate(shown);
  if (ghostWhilePaused) problems.push(`ghost text while paused: ${JSON.stringify(ghostWhilePaused)}`);
  await page.screenshot(join(args.shots, "paused.png"));
  await palette("DLM: Toggle inline suggestions");
  await until("the status bar to drop 'suggestions off'", async () => !/suggestions off/.test(await dlmStatusBar()),
              10000).catch((error) => problems.push(error.message));

  const errors = events().filter((e) => e.event === "error");
  if (errors.length) problems.push(`extension errors: ${JSON.stringify(errors)}`);
  const drafts = events().filter((e) => e.event === "draft").length;
  console.log(JSON.stringify({ passed: problems.length === 0, problems, fill, statusBar, ghost, partly, inserted, drafts, paused,
                               result: filled.result }, null, 2));
  page.ws.close();
  process.exit(problems.length ? 1 : 0);
}

/**
 * A document read-only in the editor (files.readonlyInclude, the lock on its tab): Fill holes
 * is applied to it anyway, in the editor, and the file on disk stays as it was.  VS Code
 * applies an extension's edit of a read-only document and answers true, so a refused edit is
 * no sign of one, and what the extension says of a refusal (edits.ts, EDITOR_REFUSED) must
 * not guess it.  Should a later VS Code refuse such edits, this fails, and that can change.
 */
async function readonly() {
  const problems = [];
  await goToLine(0);                         // the editor has the focus: typing does nothing there
  await page.type("zzqq");
  await sleep(500);
  const lines = () => page.evaluate("document.querySelector('.editor-instance .view-lines').textContent");
  if ((await lines()).includes("zzqq")) problems.push("the document is not read-only: typing went in");
  await palette("DLM: Fill holes");
  const filled = await until("the fill", event("fillHoles"), 90000, 500);
  await sleep(2000); // an edit that could be saved would be by now (code-server saves after a delay)
  await page.screenshot(join(args.shots, "readonly.png"));
  const before = readFileSync(args.fixture, "utf8");
  problems.push(...check(before, filled.text, filled.result).problems);  // applied, in the hole only
  if (readFileSync(args.file, "utf8") !== before) problems.push("the read-only file was written on disk");
  const errors = events().filter((e) => e.event === "error");
  if (errors.length) problems.push(`extension errors: ${JSON.stringify(errors)}`);
  console.log(JSON.stringify({ passed: problems.length === 0, problems, result: filled.result }, null, 2));
  page.ws.close();
  process.exit(problems.length ? 1 : 0);
}

/**
 * `backend: remote` with nothing at `remoteUrl`: the status bar says "unreachable".  20 s on
 * (polling at growing intervals by then) the service comes up, the driver's own answer to
 * GET /v1/metrics (remote/wire.py), and the status bar must show its model and device by
 * itself, within 45 s (asked at most every 30 s), with no fill or click.  It said
 * "unreachable" for good: polling stopped at the first answer that said so.
 *
 * Then the service goes down again, with polling over (it ended when the service answered):
 * "DLM: Fill holes" fails on it, and the status asked once after that fill finds it down
 * and must start polling again (`Follower.keepUp`), so that when the service is back, 1 s
 * after the status bar said "unreachable", the status bar shows it within 20 s by itself.
 */
async function remoteDown(port) {
  const problems = [];
  const down = await until("the status bar to say the service is unreachable", async () => {
    const text = await dlmStatusBar();
    return /unreachable/.test(text) && text;
  }, 60000);
  log(`status bar: ${down}`);
  await sleep(20000);
  let service = await serveMetrics(port);
  let up = Date.now();
  log(`service up on ${port}`);
  const showsService = async () => {
    const text = await dlmStatusBar();
    return /e2e-service · cuda:0/.test(text) && text;
  };
  const back = await until("the status bar to show the service's model", showsService, 45000)
    .catch((error) => (problems.push(error.message), undefined));
  const seconds = (Date.now() - up) / 1000;
  await page.screenshot(join(args.shots, "remote-back.png"));
  const earlier = events().filter((e) => e.event === "error");
  if (earlier.length) problems.push(`extension errors: ${JSON.stringify(earlier)}`);

  const again = Date.now();
  service.closeAllConnections();
  await new Promise((resolve) => service.close(resolve));
  log("service down again; Fill holes");
  await palette("DLM: Fill holes");
  const failed = await until("the fill to fail on the service", event("error"), 60000, 500)
    .catch((error) => (problems.push(error.message), undefined));
  if (failed && !/cannot reach/.test(failed.message)) problems.push(`not the service's failure: ${failed.message}`);
  const downAfterFill = await until("the status bar to say unreachable after the fill", async () => {
    const text = await dlmStatusBar();
    return /unreachable/.test(text) && text;
  }, 30000).catch((error) => (problems.push(error.message), undefined));
  await sleep(1000);
  service = await serveMetrics(port);
  up = Date.now();
  log("service up again");
  const backAfterFill = await until("the status bar to show the service again, polled after the fill",
    showsService, 20000).catch((error) => (problems.push(error.message), undefined));
  const secondsAfterFill = (Date.now() - up) / 1000;
  const secondsOfTheFillPart = (Date.now() - again) / 1000;
  await page.screenshot(join(args.shots, "remote-back-after-fill.png"));
  service.close();
  console.log(JSON.stringify({ passed: problems.length === 0, problems, down, back, seconds, downAfterFill,
                               backAfterFill, secondsAfterFill, secondsOfTheFillPart }, null, 2));
  page.ws.close();
  process.exit(problems.length ? 1 : 0);
}

/**
 * dlm.model names no model: the server says once that its load failed, and the status bar
 * says "failed to load".  Ghost text asked for while typing then fails at every pause
 * (-32001, the server tries the load again each time); that is no news, and must not pop up
 * as the language client's own "Request textDocument/inlineCompletion failed." at every
 * pause: the server's one notification stays the only one, and the status bar says why.
 */
async function modelMissing() {
  const problems = [];
  const failedToLoad = async () => {
    const text = await dlmStatusBar();
    return /failed to load/.test(text) && text;
  };
  const statusBar = await until("the status bar to say the model failed to load", failedToLoad, 60000);
  await sleep(2000);  // the server's own notification of the failed load is out by now
  const row = readFileSync(args.fixture, "utf8").split("\n").findIndex((line) => line.includes("for i in range(10):"));
  await goToLine(row);
  await page.press("End", "End", 35);
  const asked = Date.now();
  await page.press("Enter", "Enter", 13, 0, "\r");  // ghost text is asked for on the new line
  for (const key of "total") {  // and at each pause in typing a word there
    await sleep(1500);
    await page.type(key);
  }
  await sleep(3000);
  const failed = events().filter((e) => e.event === "suggestionFailed" && e.time >= asked);
  await palette("Notifications: Show Notifications");  // all of them, toasts hidden or not
  await sleep(1000);
  const shown = await notifications(".notifications-center");
  const statusBarAfter = await dlmStatusBar();
  await page.screenshot(join(args.shots, "model-missing.png"));
  const popups = shown.filter((t) => /Request .* failed/.test(t));
  if (popups.length) problems.push(`failed suggestions popped up: ${JSON.stringify(popups)}`);
  if (!shown.some((t) => t.startsWith("dlm-lsp:"))) problems.push(`no notification of the failed load: ${JSON.stringify(shown)}`);
  if (!failed.length) problems.push("no suggestion was asked for and failed: nothing was checked");
  if (!/failed to load/.test(statusBarAfter)) problems.push(`the status bar no longer says the load failed: ${statusBarAfter}`);
  const retried = await retryFromTheNotification(problems);
  console.log(JSON.stringify({ passed: problems.length === 0, problems, statusBar, statusBarAfter, shown,
                               failed: failed.length, ...retried }, null, 2));
  page.ws.close();
  process.exit(problems.length ? 1 : 0);
}

/**
 * The server's notification of the failed load offers Retry (the notification center is
 * open): its click runs DLM: Retry loading the model, whose answer is one notification of
 * the load failed again (not the server's copy of its error beside it), and the status bar
 * counts down to the server's next try.
 */
async function retryFromTheNotification(problems) {
  const button = await notificationButton("Retry");
  if (!button) {
    problems.push("the notification of the failed load has no Retry button");
    return {};
  }
  const clicked = Date.now();
  await page.click(button.x, button.y);
  const retried = await until("the retry's answer", () => events().find((e) => e.event === "retried" && e.time >= clicked),
                              60000, 500).catch((error) => (problems.push(error.message), undefined));
  const statusBarRetried = await dlmStatusBar();
  await sleep(2000);  // any other notification is out by now
  // the center closed with its last notification, the one clicked
  await palette("Notifications: Show Notifications");
  await sleep(1000);
  const shownRetried = (await notifications(".notifications-center")).filter((t) => t.startsWith("dlm-lsp"));
  await page.screenshot(join(args.shots, "model-missing-retried.png"));
  if (retried?.status?.loaded !== false) problems.push(`the retry did not fail as it must: ${JSON.stringify(retried)}`);
  const again = shownRetried.filter((t) => /failed to load again/.test(t));
  if (again.length !== 1) problems.push(`not one notification of the retry's failure: ${JSON.stringify(shownRetried)}`);
  const copy = retried?.status?.loadError && shownRetried.filter((t) => t === `dlm-lsp: ${retried.status.loadError}`);
  if (copy?.length) problems.push(`the server's copy of the failure was shown too: ${JSON.stringify(shownRetried)}`);
  if (!/failed to load · retry in \d+ s/.test(statusBarRetried)) {
    problems.push(`the status bar does not count down to the next try: ${statusBarRetried}`);
  }
  return { statusBarRetried, shownRetried };
}

/**
 * Ghost text that fails for a reason the status does not say (here out of memory; a fill past
 * `timeoutMs` is the same to the extension) showed nothing and said nothing: the status bar
 * said all was well.  Now it warns until a suggestion works, and one notification says why.
 */
async function outOfMemory() {
  const problems = [];
  const row = readFileSync(args.fixture, "utf8").split("\n").findIndex((line) => line.includes("for i in range(10):"));
  await goToLine(row);
  await page.press("End", "End", 35);
  const asked = Date.now();
  await page.press("Enter", "Enter", 13, 0, "\r");  // ghost text is asked for on the new line: the first fill
  const warned = await until("the status bar's warning", async () => {
    const text = await dlmStatusBar();
    return /out of memory/.test(text) && text;
  }, 60000, 100).catch((error) => (problems.push(error.message), ""));
  await sleep(2000);  // the notification is out by now
  await page.type("t");  // the next suggestion: no fault left
  const cleared = await until("a suggestion that works to clear the warning", async () => {
    const text = await dlmStatusBar();
    return !/out of memory/.test(text) && /dlm: default · cpu · \d/.test(text) && text;
  }, 60000, 250).catch((error) => (problems.push(error.message), ""));
  await palette("Notifications: Show Notifications");
  await sleep(1000);
  const shown = await notifications(".notifications-center");
  await page.screenshot(join(args.shots, "oom.png"));
  const failed = events().filter((e) => e.event === "suggestionFailed" && e.time >= asked);
  const ours = shown.filter((t) => t.startsWith("dlm-lsp: suggestions fail: "));
  if (ours.length !== 1 || !/out of memory/.test(ours[0])) problems.push(`not one notification of it: ${JSON.stringify(shown)}`);
  if (shown.some((t) => /Request .* failed/.test(t))) problems.push(`the client's own popup: ${JSON.stringify(shown)}`);
  if (!failed.some((e) => e.trouble === "memory")) problems.push(`no suggestion failed out of memory: ${JSON.stringify(failed)}`);
  console.log(JSON.stringify({ passed: problems.length === 0, problems, warned, cleared, shown, failed }, null, 2));
  page.ws.close();
  process.exit(problems.length ? 1 : 0);
}

/** The service's GET /v1/metrics (remote/wire.py), listening on `port` once resolved. */
async function serveMetrics(port) {
  const { createServer } = await import("node:http");
  const service = createServer((request, response) => {
    const body = JSON.stringify({ model: "e2e-service", device: "cuda:0", replicas: 1, queueDepth: 0 });
    response.writeHead(request.url.endsWith("/v1/metrics") ? 200 : 404, { "Content-Type": "application/json" });
    response.end(body);
  });
  await new Promise((resolve) => service.listen(port, "127.0.0.1", resolve));
  return service;
}

/** The texts of the notifications on screen: toasts, or the notification center's list. */
const notifications = (where) => page.evaluate(
  `[...document.querySelectorAll('${where} .notification-list-item-message')].map(e => e.textContent)`);

/** Where to click the button `label` of a notification in the open notification center; null: none. */
const notificationButton = (label) => page.evaluate(`(() => {
  const b = [...document.querySelectorAll('.notifications-center .monaco-button')]
    .find((e) => e.textContent.trim() === ${JSON.stringify(label)});
  if (!b) return null;
  const r = b.getBoundingClientRect();
  return { x: r.x + r.width / 2, y: r.y + r.height / 2 };
})()`);

/** A shared server that refuses the token: one error that says which setting to fix. */
async function refused() {
  const failed = await until("the extension to report the refusal", event("serverFailed"), 60000, 500);
  await until("the error notification", async () =>
    (await notifications(".notification-toast")).some((t) => t.includes("wrong token")), 20000);
  await sleep(2000); // a second popup (the language client's own) would be out by now
  await palette("Notifications: Show Notifications"); // all of them, toasts hidden or not
  await sleep(1000);
  const shown = (await notifications(".notifications-center")).filter((t) => t.includes("wrong token"));
  const statusBar = await dlmStatusBar();
  await page.screenshot(join(args.shots, "refused.png"));
  const problems = [];
  if (!/wrong token/.test(failed.message)) problems.push(`not the token's refusal: ${failed.message}`);
  // Ours says what to do; the language client's own "couldn't create connection" beside it
  // (the bare error) is kept to the dlm-lsp output while the extension reports the start.
  if (!shown.some((t) => t.includes("dlm.server.token"))) problems.push(`no hint at dlm.server.token: ${JSON.stringify(shown)}`);
  if (shown.some((t) => /restart/i.test(t))) problems.push(`a refused client was restarted: ${JSON.stringify(shown)}`);
  if (shown.length > 1) problems.push(`${shown.length} notifications of one refusal: ${JSON.stringify(shown)}`);
  if (!/failed/.test(statusBar)) problems.push(`the status bar does not say it failed: ${statusBar}`);
  console.log(JSON.stringify({ passed: problems.length === 0, problems, shown, statusBar }, null, 2));
  page.ws.close();
  process.exit(problems.length ? 1 : 0);
}

/**
 * The server exits while running, and the language client's restart of it fails: one
 * notification, the extension's (not the client's "Restarting server failed" and
 * "couldn't create connection to server" beside it), whose Restart server button starts
 * the server again once it can start.
 */
async function crashed() {
  const problems = [];
  writeFileSync(join(args.crash, "refuse"), "");
  const killed = Date.now();
  process.kill(Number(readFileSync(join(args.crash, "pid"), "utf8")), "SIGKILL");
  await until("a notification of the failed restart", async () => (await notifications(".notification-toast")).length > 0,
              60000, 500);
  await sleep(3000); // all of them are out by now
  await palette("Notifications: Show Notifications"); // all of them, toasts hidden or not
  await sleep(1000);
  const shown = await notifications(".notifications-center");
  const statusBar = await dlmStatusBar();
  await page.screenshot(join(args.shots, "crashed.png"));
  const ended = events().find((e) => e.event === "restartEnded");
  if (ended?.kind !== "restartFailed") problems.push(`the extension did not say the restart failed: ${JSON.stringify(ended)}`);
  if (shown.length !== 1) problems.push(`${shown.length} notifications of one failed restart: ${JSON.stringify(shown)}`);
  if (!shown.every((t) => t.startsWith("dlm-lsp: the server exited"))) problems.push(`not ours: ${JSON.stringify(shown)}`);
  if (!/failed/.test(statusBar)) problems.push(`the status bar does not say it failed: ${statusBar}`);
  // the way back: the notification's button, once the server can start again
  rmSync(join(args.crash, "refuse"));
  const button = await notificationButton("Restart server");
  let restarted = "";
  if (!button) {
    problems.push("the notification has no Restart server button");
  } else {
    await page.click(button.x, button.y);
    restarted = await until("the server to run again", async () => {
      const text = await dlmStatusBar();
      const loadedAgain = events().some((e) => e.event === "modelLoaded" && e.time > killed);
      return loadedAgain && /cpu|cuda/.test(text) && text;
    }, 120000, 500).catch((error) => (problems.push(error.message), ""));
  }
  console.log(JSON.stringify({ passed: problems.length === 0, problems, shown, statusBar, restarted }, null, 2));
  page.ws.close();
  process.exit(problems.length ? 1 : 0);
}

/**
 * Only a file of a language that dlm.languages lacks is open: the extension is active but
 * starts no server, a Python process importing torch, and shows nothing in the status bar
 * (DLM: Show server status says why); a fill command run there says which setting to add
 * the language to, and then the status bar says "not started" in that file, and its click
 * why.  Adding the language to dlm.languages, as a
 * user who wants it would, starts the server, which then fills the file's hole.
 */
async function lateLanguage(language) {
  const problems = [];
  await until("the extension to activate", event("activated"), 60000, 500);
  await sleep(5000); // a start (the server process) would be under way by now
  if (events().some((e) => e.event === "launching")) {
    problems.push(`a server was started with no file of dlm.languages open: ${JSON.stringify(events())}`);
  }
  // nothing in the status bar: the extension has nothing to say of a Perl file (it showed
  // "dlm: not started" in every window)
  const hidden = await dlmStatusBar();
  if (hidden) problems.push(`the status bar shows dlm with no file of dlm.languages open: "${hidden}"`);
  // DLM: Show server status says why, in the dlm-lsp output, with the item hidden
  await palette("DLM: Show server status");
  const output = async () => (await page.evaluate(
    "[...document.querySelectorAll('.part.panel .view-line')].map(e => e.textContent).join(' ')"))
    .replace(/\u00a0/g, " "); // the editor shows spaces as nbsp
  const why = await until("the output to say why the server is not started", async () => {
    const text = await output();
    return /not started/.test(text) && text;
  }, 10000).catch((error) => (problems.push(error.message), ""));
  if (why && !(why.includes("dlm.languages") && why.includes(language))) {
    problems.push(`the output does not say that ${language} is not in dlm.languages: ${JSON.stringify(why)}`);
  }
  // a fill command from the palette says which setting to add the language to, and
  // starts nothing (the server is never sent such a file: it could only fail) ...
  await palette("DLM: Fill holes");
  const refused = await until("the fill command to say the language is not served", event("notServed"), 10000, 250)
    .catch((error) => (problems.push(error.message), undefined));
  if (refused && !refused.reason.includes(language)) {
    problems.push(`the fill command's refusal does not name ${language}: ${JSON.stringify(refused)}`);
  }
  // ... and the status bar, in the file the user wants dlm for, says it is not started ...
  const idle = await until("the status bar to say the server is not started", async () => {
    const text = await dlmStatusBar();
    return /not started/.test(text) && text;
  }, 10000).catch(async (error) => (problems.push(`${error.message}: "${await dlmStatusBar()}"`), ""));
  // ... and a click on it says why again
  const item = await page.evaluate(`(() => {
    const e = [...document.querySelectorAll('.statusbar-item')].find((e) => /not started/.test(e.textContent));
    if (!e) return null;
    const r = e.getBoundingClientRect();
    return { x: r.x + r.width / 2, y: r.y + r.height / 2 };
  })()`);
  // the time of the last "not started" line on screen (the panel shows the latest lines)
  const told = (text) => [...text.matchAll(/(\d+:\d+:\d+\.\d+) \[info\] the dlm-lsp server is not started/g)].pop()?.[1];
  let whyAgain = "";
  if (item) {
    const before = told(await output());
    await page.click(item.x, item.y);
    whyAgain = await until("the click to say why again", async () => {
      const text = await output();
      return told(text) && told(text) !== before && text;
    }, 10000).catch((error) => (problems.push(error.message), ""));
  }
  await page.screenshot(join(args.shots, "not-started.png"));
  await sleep(2000);
  if (events().some((e) => e.event === "launching")) {
    problems.push(`a fill command started the server for a ${language} file: ${JSON.stringify(events())}`);
  }

  // The user adds the language (here in the workspace's settings.json; the Settings UI
  // writes the same).
  const extension = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
  const defaults = extension.contributes.configuration.flatMap((c) => Object.entries(c.properties))
    .find(([key]) => key === "dlm.languages")[1].default;
  const settings = JSON.parse(readFileSync(args.settings, "utf8"));
  settings["dlm.languages"] = [...defaults, language];
  writeFileSync(args.settings, JSON.stringify(settings, null, 2));
  log(`added ${language} to dlm.languages`);
  await until("the extension to start the server", event("serverStarted"), 60000, 500);
  if (args["remote-down"]) return remoteDown(Number(args["remote-down"]));
  const loaded = await until("the model to load", event("modelLoaded"), 120000, 500);
  log(`server up: ${JSON.stringify(loaded.status)}`);
  await palette("DLM: Fill holes");
  const filled = await until("the fill", event("fillHoles"), 90000, 500);
  await sleep(1000); // the status bar refreshes after each fill
  const statusBar = await dlmStatusBar();
  await page.screenshot(join(args.shots, "after-fill.png"));
  const { problems: fillProblems, fill } = check(readFileSync(args.fixture, "utf8"), filled.text, filled.result);
  problems.push(...fillProblems);
  if (!/dlm: .*cpu|dlm: .*cuda/.test(statusBar)) problems.push(`status bar shows no model/device: "${statusBar}"`);
  const errors = events().filter((e) => e.event === "error");
  if (errors.length) problems.push(`extension errors: ${JSON.stringify(errors)}`);
  console.log(JSON.stringify({ passed: problems.length === 0, problems, hidden, idle, why, whyAgain, fill, statusBar },
                             null, 2));
  page.ws.close();
  process.exit(problems.length ? 1 : 0);
}

/**
 * A notebook's cell: click into the cell with the hole, run Fill holes (the edit must
 * change that cell only, inside the hole), then open a new line below the cell's `for`
 * line, as the default run does in hello.py, wait for ghost text in the cell, accept it
 * with Tab, and check (Fill holes again records the cell's text) that the cell holds it.
 * The ghost text is checked in the cell's own editor: a notebook's cells are editors of
 * their own, inside `.notebook-editor`, and the focused one is `.cell-editor-focus`.
 */
async function notebook() {
  const problems = [];
  /** Where to click to put the cursor at the end of the cell's line holding `text` (the
   *  editor shows its spaces as nbsp). */
  const lineEnd = (text) => () => page.evaluate(`(() => {
    const line = [...document.querySelectorAll('.notebook-editor .cell-editor-part .view-line')]
      .find((e) => e.textContent.replace(/\u00a0/g, " ").includes(${JSON.stringify(text)}));
    if (!line) return null;
    const r = line.getBoundingClientRect();
    return { x: r.x + r.width - 5, y: r.y + r.height / 2 };
  })()`);
  const cell = await until("the cell with the hole", lineEnd(args.marker), 30000);
  await page.click(cell.x, cell.y);
  await sleep(1000);
  await palette("DLM: Fill holes");
  log("ran DLM: Fill holes in the cell");
  const filled = await until("the fill", event("fillHoles"), 90000, 500);
  const { problems: fillProblems, fill } = check(readFileSync(args.fixture, "utf8"), filled.text, filled.result);
  problems.push(...fillProblems);
  if (!filled.uri?.startsWith("vscode-notebook-cell:")) problems.push(`the fill was not a cell's: ${filled.uri}`);
  await page.screenshot(join(args.shots, "notebook-after-fill.png"));

  // Ghost text: a new line below the `for` line (VS Code indents it), in the loop's body.
  // (At the end of a cell, after a `for` line with no body, the shipped model writes
  // blanks: no suggestion, in a notebook as in a file.)
  const forLine = await until("the cell's for line", lineEnd("for r in range(3):"), 10000);
  await page.click(forLine.x, forLine.y);
  await sleep(500);
  await page.press("End", "End", 35);
  await page.press("Enter", "Enter", 13, 0, "\r");
  const shown = `[...document.querySelectorAll('.notebook-editor .cell-editor-focus .ghost-text-decoration, '
    + '.notebook-editor .cell-editor-focus .ghost-text')]
    .map(e => [e.getBoundingClientRect(), e.textContent])
    .sort(([a], [b]) => a.top - b.top || a.left - b.left).map(([, t]) => t).join('')`;
  const bare = (text) => text.replace(/[\s\u00a0]/g, "");
  const ghost = await until("ghost text in the cell", async () => bare(await page.evaluate(shown)) && page.evaluate(shown),
                            45000).catch((error) => (problems.push(error.message), ""));
  await page.screenshot(join(args.shots, "notebook-ghost-text.png"));
  if (ghost) {
    await page.press("Tab", "Tab", 9);
    await sleep(1000);
    await palette("DLM: Fill holes");  // no hole is left: it only records the cell's text
    const again = await until("the second Fill holes", () => events().filter((e) => e.event === "fillHoles")[1],
                              30000, 500).catch((error) => (problems.push(error.message), undefined));
    const lines = filled.text.split("\n");
    const row = lines.findIndex((line) => line.includes("for r in range(3):"));
    const head = lines.slice(0, row + 1).join("\n") + "\n";
    const rest = "\n" + lines.slice(row + 1).join("\n");
    const text = again?.text ?? "";
    const added = text.startsWith(head) && text.endsWith(rest) ? text.slice(head.length, text.length - rest.length) : null;
    if (again && (added === null || bare(added) !== bare(ghost))) {
      problems.push(`the cell does not hold the accepted suggestion ${JSON.stringify(ghost)} on the new line: ${JSON.stringify(text)}`);
    }
    if (again && again.uri !== filled.uri) problems.push(`the suggestion went to ${again.uri}, not the cell ${filled.uri}`);
  }
  const errors = events().filter((e) => e.event === "error");
  if (errors.length) problems.push(`extension errors: ${JSON.stringify(errors)}`);
  console.log(JSON.stringify({ passed: problems.length === 0, problems, fill, ghost }, null, 2));
  page.ws.close();
  process.exit(problems.length ? 1 : 0);
}

/**
 * The completion item, with a fill the server plants (tests/scripted_fills.py): type
 * `ret` at the end of the fixture's indented blank line, in a function, trigger
 * suggestions with Ctrl+Space, accept the dlm item (label `return [`, detail "dlm-lsp
 * fill") with Enter, save, and compare the file with the fixture holding `ret` and the
 * fill there, byte for byte: `ret` not doubled (the item replaces the word it takes in),
 * and the fill's later lines at the columns the server wrote them at, not moved right by
 * the cursor line's indentation (VS Code's default for an item without insertTextMode
 * asIs).  Ghost text is off (dlm.inline.enabled), so that Enter can only take the item.
 */
async function completion(fill) {
  const problems = [];
  const before = readFileSync(args.fixture, "utf8");
  const lines = before.split("\n");
  const row = lines.findIndex((line) => line.length > 0 && !line.trim());
  const cursor = lines.slice(0, row + 1).join("\n").length;
  const expected = before.slice(0, cursor) + "ret" + fill + before.slice(cursor);
  await quickInput(page, () => page.press("g", "KeyG", 71, 2)); // Go to Line
  await page.type(String(row + 1));
  await page.press("Enter", "Enter", 13, 0, "\r");
  await sleep(500);
  await page.press("End", "End", 35);
  await page.type("ret");
  await sleep(500);
  await page.press(" ", "Space", 32, 2); // Ctrl+Space: editor.action.triggerSuggest
  // the suggest widget's rows: label, and the detail VS Code shows beside the focused one
  const label = "ret" + fill.split("\n")[0];
  const shown = await until(`the item ${JSON.stringify(label)} in the suggest widget`, async () => {
    const list = await rows();
    return list.some((r) => r.label === label) && list;
  }, 60000).catch((error) => (problems.push(error.message), null));
  await page.screenshot(join(args.shots, "completion-shown.png"));
  let chosen = null;
  if (shown) {
    chosen = await focusItem(label, shown.length);
    if (chosen?.label !== label) problems.push(`could not select the dlm item: ${JSON.stringify(await rows())}`);
    else if (chosen.detail && chosen.detail !== "dlm-lsp fill") problems.push(`the item's detail: ${JSON.stringify(chosen.detail)}`);
    await page.press("Enter", "Enter", 13, 0, "\r");
  }
  // Accepting is asynchronous: save until the file holds more than the typed `ret`.
  const typed = before.slice(0, cursor) + "ret" + before.slice(cursor);
  const saved = await until("the accepted item in the saved file", async () => {
    await page.press("s", "KeyS", 83, 2);
    await sleep(300);
    const text = readFileSync(args.file, "utf8");
    return text !== before && text !== typed && text;
  }, 15000, 700).catch((error) => (problems.push(`${error.message}: ${JSON.stringify(readFileSync(args.file, "utf8"))}`), ""));
  await page.screenshot(join(args.shots, "completion-accepted.png"));
  if (saved && saved !== expected) {
    problems.push(`the saved file is not the fixture with \`ret\` and the fill: expected ${JSON.stringify(expected)}, got ${JSON.stringify(saved)}`);
  }
  const errors = events().filter((e) => e.event === "error");
  if (errors.length) problems.push(`extension errors: ${JSON.stringify(errors)}`);
  console.log(JSON.stringify({ passed: problems.length === 0, problems, shown, chosen, saved }, null, 2));
  page.ws.close();
  process.exit(problems.length ? 1 : 0);
}

/** The suggest widget's rows: label, and the detail VS Code shows beside the focused one. */
const rows = () => page.evaluate(`[...document.querySelectorAll('.suggest-widget .monaco-list-row')]
  .map((r) => ({ label: (r.querySelector('.label-name') || {}).textContent || '',
                 detail: (r.querySelector('.details-label') || {}).textContent || '',
                 focused: r.classList.contains('focused') }))`);

/** Move the suggest widget's focus down (at most `count` rows) to the item `label`; the
 *  focused row then, which is that item's unless it could not be reached. */
async function focusItem(label, count) {
  let focused = null;
  for (let step = 0; step < count; step++) {
    focused = (await rows()).find((r) => r.focused);
    if (focused?.label === label) break;
    await page.press("ArrowDown", "ArrowDown", 40);
    await sleep(200);
  }
  return focused;
}

/** Put the cursor at the code of line `row` (0-based) with Go to Line (column 1) and
 *  Home (VS Code's goes to the line's first character that is not whitespace). */
async function goToLine(row) {
  await quickInput(page, () => page.press("g", "KeyG", 71, 2));
  await page.type(String(row + 1));
  await page.press("Enter", "Enter", 13, 0, "\r");
  await sleep(500);
  await page.press("Home", "Home", 36);
}

/** Select the code of line `row`, from its first character that is not whitespace to its end. */
async function selectCode(row) {
  await goToLine(row);
  await page.press("End", "End", 35, 8);
}

/** Save until the file on disk is `expected` (an edit is applied asynchronously); the
 *  file's text either way. */
async function savedAs(expected, timeoutMs = 10000) {
  await until("the saved file to be as expected", async () => {
    await page.press("s", "KeyS", 83, 2);
    await sleep(300);
    return readFileSync(args.file, "utf8") === expected;
  }, timeoutMs, 700).catch(() => undefined);
  return readFileSync(args.file, "utf8");
}

/** The rows of the shown action menu (Refactor, quick fix): text, whether disabled
 *  (`option-disabled`: drawn faded, not runnable), tooltip; null where none is shown. */
const actionMenu = () => page.evaluate(`(() => {
  const widget = [...document.querySelectorAll('.action-widget')].find((w) => w.getBoundingClientRect().height > 0);
  if (!widget) return null;
  return [...widget.querySelectorAll('.monaco-list-row')].map((r) => ({
    text: r.textContent.replace(/\u00a0/g, " ").trim(), header: r.classList.contains('group-header'),
    disabled: r.classList.contains('option-disabled'), title: r.title || '' }));
})()`);

/** The lightbulb, where the editor shows one (a content widget, or a glyph in the gutter:
 *  `codicon-gutter-lightbulb`, VS Code's default now). */
const lightbulb = () => page.evaluate(`[...document.querySelectorAll(
  '.part.editor .lightBulbWidget, .part.editor [class*="lightbulb"], .part.editor [class*="light-bulb"]')]
  .some((e) => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0
                 && getComputedStyle(e).visibility !== 'hidden'; })`);

/** What the editor says in its message widget (e.g. "No code actions available"). */
const editorMessage = () => page.evaluate(
  "[...document.querySelectorAll('.monaco-editor-overlaymessage')].map((e) => e.textContent).join(' | ')");

/**
 * "DLM: Rewrite block" with fills the server plants (tests/scripted_fills.py reads the
 * file `fillFile` at each fill), the cursor on the function's `result += x` line (the
 * statement that line holds, from its line start: what the command grows it to):
 *  a. a fill of whitespace only applies nothing: the saved file is the fixture, byte for
 *     byte, and the status bar says why (the model wrote only whitespace);
 *  b. a fill of code replaces that line and nothing else, at the version the command was
 *     asked at (the result's `version`).
 * Then the code actions, which ask for no fill: a selection of the function gets "Rewrite
 * selection with dlm-lsp" in the Refactor menu (Ctrl+Shift+R); one of the 300 lines below,
 * more tokens than maxSpanTokens, gets it disabled: VS Code draws the row faded (under its
 * title, not the reason), leaves it out of the quick fix menu (Ctrl+.) and the lightbulb,
 * which show only actions that can run, and shows the server's reason where a keybinding
 * applies the rewrite at once (editor.action.codeAction, refactor.rewrite, apply "first").
 */
async function rewrite(fillFile) {
  const problems = [];
  const before = readFileSync(args.fixture, "utf8");
  const lines = before.split("\n");
  const row = lines.findIndex((line) => line.trim() === "result += x");
  const rewrites = () => events().filter((e) => e.event === "rewriteBlock");

  // a. whitespace: nothing applied, and the status bar says why
  writeFileSync(fillFile, "  ");
  await selectCode(row);
  await palette("DLM: Rewrite block");
  log("ran DLM: Rewrite block (planted fill: whitespace)");
  const blank = await until("the first rewrite", () => rewrites()[0], 90000, 500);
  const told = await until("the status bar to say nothing was applied", async () => {
    const text = await dlmStatusBar();
    return /nothing applied/.test(text) && text;
  }, 5000, 200).catch(async (error) => (problems.push(`${error.message}: "${await dlmStatusBar()}"`), ""));
  if (told && !/only whitespace/.test(told)) problems.push(`the status bar does not say why: "${told}"`);
  await page.screenshot(join(args.shots, "rewrite-whitespace.png"));
  if (blank.result?.applied !== false || !/only whitespace/.test(blank.result?.message ?? "")) {
    problems.push(`a rewrite of whitespace was not refused with a message: ${JSON.stringify(blank.result)}`);
  }
  await sleep(1000); // an edit, had one been sent, would have landed
  const unchanged = await savedAs(before, 3000);
  if (unchanged !== before) problems.push(`a rewrite of whitespace changed the file: ${JSON.stringify(unchanged.slice(0, 200))}`);

  // b. code: the line replaced by the planted text, nothing else, at the version asked at
  const planted = "        result += 2 * x  # the planted rewrite";
  writeFileSync(fillFile, planted);
  await selectCode(row);
  await palette("DLM: Rewrite block");
  log("ran DLM: Rewrite block (planted fill: code)");
  const written = await until("the second rewrite", () => rewrites()[1], 90000, 500);
  const expected = [...lines.slice(0, row), planted, ...lines.slice(row + 1)].join("\n");
  const saved = await savedAs(expected);
  await page.screenshot(join(args.shots, "rewrite-applied.png"));
  const range = { start: { line: row, character: 0 }, end: { line: row, character: lines[row].length } };
  if (!written.result?.applied) problems.push(`the rewrite was not applied: ${JSON.stringify(written.result)}`);
  if (JSON.stringify(written.result?.range) !== JSON.stringify(range)) {
    problems.push(`the rewrite's range is not the line's statement: ${JSON.stringify(written.result?.range)}`);
  }
  if (written.result?.version !== blank.version) {  // the first rewrite left the version as it was
    problems.push(`the rewrite was made at version ${written.result?.version}, not ${blank.version}, where it was asked`);
  }
  if (saved !== expected) {
    problems.push(`the saved file is not the fixture with the line rewritten: expected ${JSON.stringify(expected.slice(0, 200))}, `
                  + `got ${JSON.stringify(saved.slice(0, 200))}`);
  }

  // c. the Refactor menu: a short selection (the function) offers the rewrite ...
  const openRefactor = async () => {
    await page.press("R", "KeyR", 82, 2 | 8); // Ctrl+Shift+R: editor.action.refactor
    return until("the Refactor menu", actionMenu, 10000).catch(async (error) => {
      problems.push(`${error.message} (editor says: "${await editorMessage()}")`);
      return null;
    });
  };
  await goToLine(0);
  for (let i = 0; i < 5; i++) await page.press("ArrowDown", "ArrowDown", 40, 8);
  await sleep(1500);
  const short = await openRefactor();
  await page.screenshot(join(args.shots, "refactor-short.png"));
  await page.press("Escape", "Escape", 27);
  const offered = short?.find((r) => r.text.includes("Rewrite selection with dlm-lsp"));
  if (short && (!offered || offered.disabled)) {
    problems.push(`a short selection's Refactor menu has no runnable rewrite: ${JSON.stringify(short)}`);
  }
  // ... and one of the 300 lines shows it disabled, with the reason, and only there
  const first = lines.findIndex((line) => line.startsWith("SQUARE_001")); // b kept the lines where they were
  // selected from the end of the file up, so that the view shows its start, where a
  // lightbulb would be drawn
  await page.press("End", "End", 35, 2); // Ctrl+End
  await page.press("Home", "Home", 36, 2 | 8); // Ctrl+Shift+Home: select to the start
  for (let i = 0; i < first; i++) await page.press("ArrowDown", "ArrowDown", 40, 8);
  await sleep(3000); // the code actions are asked for, the lightbulb updated
  const bulb = await lightbulb();
  await page.screenshot(join(args.shots, "selection-long.png"));
  if (bulb) problems.push("the editor shows a lightbulb on the long selection");
  await page.press(".", "Period", 190, 2); // Ctrl+.: editor.action.quickFix
  await sleep(2000);
  const quickFix = await actionMenu();
  const quickFixMessage = await editorMessage();
  await page.screenshot(join(args.shots, "quickfix-long.png"));
  await page.press("Escape", "Escape", 27);
  if (quickFix?.some((r) => /dlm-lsp|maxSpanTokens/.test(r.text))) {
    problems.push(`the quick fix menu offers the rewrite of a selection too long: ${JSON.stringify(quickFix)}`);
  }
  await sleep(500);
  const long = await openRefactor();
  await page.screenshot(join(args.shots, "refactor-long.png"));
  await page.press("Escape", "Escape", 27);
  const faded = long?.find((r) => r.text.includes("Rewrite selection with dlm-lsp"));
  if (long && (!faded || !faded.disabled)) {
    problems.push(`the Refactor menu does not show the rewrite disabled: ${JSON.stringify(long)}`);
  }
  // the reason: VS Code shows it where a keybinding would apply the action at once (here
  // Ctrl+Alt+R, editor.action.codeAction for refactor.rewrite, apply "first", which
  // run.sh binds), in the editor's message widget
  await page.press("r", "KeyR", 82, 1 | 2);
  const reason = await until("the editor to say why the rewrite is disabled", async () => {
    const text = await editorMessage();
    return /maxSpanTokens/.test(text) && text;
  }, 10000).catch(async (error) => (problems.push(`${error.message}: "${await editorMessage()}"`), ""));
  await page.screenshot(join(args.shots, "rewrite-reason.png"));
  const errors = events().filter((e) => e.event === "error");
  if (errors.length) problems.push(`extension errors: ${JSON.stringify(errors)}`);
  console.log(JSON.stringify({ passed: problems.length === 0, problems, told, blank: blank.result,
                               written: written.result, short, bulb, quickFix, quickFixMessage, long, reason }, null, 2));
  page.ws.close();
  process.exit(problems.length ? 1 : 0);
}

/**
 * A fill slower than VS Code waits for ghost text is made once, not twice: type `total`
 * on the fixture's indented blank line in a function, a key every 40 ms (within the 100 ms
 * debounce run.sh sets, as a user types), with the server's fills held until 1.5 s after
 * the first one began (the gate of tests/scripted_fills.py).  VS Code (1.139) waits 750 ms
 * for ghost text after a word is typed, then gives up on it and asks for completion items
 * at the same place: that request began a second fill of the same text, which stopped the
 * ghost text's (the server's log: begin, begin, stopped, end).  Now it waits for the ghost
 * text's fill, which the server answers it from: no fill is stopped, and the planted fill
 * is the dlm item in the suggest widget.  With `editor.quickSuggestions` "on" (run.sh
 * --typing-quick) VS Code asks for completion items at the first key instead, and not
 * again while that request waits: it is answered at the word's end, the same checks.
 * Then the item, accepted with Enter, sets off no fill at its end: VS Code asks for ghost
 * text there as soon as the item is selected (after its text) and again once it is in, and
 * each began a fill of the model's (the first of them a second fill of the word's place,
 * the second answered from it), whose fill had ended there (offers.py).
 */
async function typing(fillLog) {
  const problems = [];
  const lines = readFileSync(args.fixture, "utf8").split("\n");
  const row = lines.findIndex((line) => line.length > 0 && !line.trim());
  await goToLine(row);
  await page.press("End", "End", 35);
  await sleep(1000);
  const fills = () => readFileSync(fillLog, "utf8").split("\n").filter(Boolean);
  const gate = join(dirname(fillLog), "gate");
  rmSync(gate, { force: true });
  const opened = until("a fill", () => fills().includes("begin"), 30000, 20)
    .then(() => sleep(1500)).then(() => writeFileSync(gate, ""));
  for (const key of "total") {  // as a keyboard types (Input.insertText sets off no suggestions)
    const upper = key.toUpperCase();
    await page.press(key, `Key${upper}`, upper.charCodeAt(0), 0, key);
    await sleep(40);
  }
  await opened;
  const label = "total" + readFileSync(join(dirname(fillLog), "fill.txt"), "utf8");  // run.sh plants it
  const items = () => page.evaluate(`[...document.querySelectorAll('.suggest-widget .monaco-list-row')]
    .map((r) => (r.querySelector('.label-name') || {}).textContent || '')`);
  const shown = await until(`the item ${JSON.stringify(label)} in the suggest widget`, async () => {
    const list = await items();
    return list.includes(label) && list;
  }, 30000).catch((error) => (problems.push(error.message), null));
  await sleep(2000);  // a fill asked for late would have begun by now
  await page.screenshot(join(args.shots, "typing.png"));
  const log = fills();
  if (log.includes("stopped")) problems.push(`a fill was stopped, its work thrown away: ${JSON.stringify(log)}`);
  // Accept the item with Enter: VS Code asks for ghost text after it, while it is selected
  // and once it is in: the model ended that fill there, so none is made (offers.py).
  let accepted = "";
  if (shown) {
    const chosen = await focusItem(label, shown.length);
    if (chosen?.label !== label) problems.push(`could not select the dlm item: ${JSON.stringify(await rows())}`);
    await page.press("Enter", "Enter", 13, 0, "\r");
    const line = (text) => text.split("\n")[row];
    accepted = await until("the accepted item in the saved file", async () => {
      await page.press("s", "KeyS", 83, 2);
      await sleep(300);
      return line(readFileSync(args.file, "utf8")).trim() === label && line(readFileSync(args.file, "utf8"));
    }, 15000, 700).catch((error) => (problems.push(`${error.message}: ${JSON.stringify(readFileSync(args.file, "utf8"))}`), ""));
    await sleep(2000);  // the debounce and VS Code's request after it, many times over
    await page.screenshot(join(args.shots, "typing-accepted.png"));
  }
  const placesLog = join(dirname(fillLog), "places.log");  // run.sh's DLM_TEST_FILL_PLACES
  const places = (existsSync(placesLog) ? readFileSync(placesLog, "utf8") : "").split("\n").filter(Boolean)
    .map((p) => JSON.parse(p));
  const past = places.filter((p) => p.trim() === label);
  if (past.length) problems.push(`${past.length} fill(s) made at the end of the dlm item, selected or accepted: ${JSON.stringify(places)}`);
  const errors = events().filter((e) => e.event === "error");
  if (errors.length) problems.push(`extension errors: ${JSON.stringify(errors)}`);
  console.log(JSON.stringify({ passed: problems.length === 0, problems, log, shown, accepted, places }, null, 2));
  page.ws.close();
  process.exit(problems.length ? 1 : 0);
}

main().catch(async (error) => {
  log(`FAILED: ${error.message}`);
  if (page) await page.screenshot(join(args.shots, "failure.png")).catch(() => undefined);
  log(`events so far: ${JSON.stringify(events())}`);
  process.exit(1);
});
