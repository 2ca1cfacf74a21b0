/**
 * One language client at a time, whatever the user does while it starts.
 *
 * A start takes a while (the server imports torch: seconds), and a language client
 * cannot be stopped until its start has ended.  A restart meanwhile (**DLM: Restart
 * server**, a changed `dlm.server.*` setting) used to start a second client beside the
 * first: the first server kept running, owned by nobody, and the second failed on the
 * commands the first had registered ("command 'dlm.fillHoles' already exists"), so the
 * status bar said "server failed" while fills went to the orphan.  Now the start in
 * progress is abandoned (its process killed, its socket closed) and waited for before
 * the next one begins.
 *
 * A start can also get no answer at all: something listens at `dlm.server.address`
 * but never answers `initialize` (a hung server, another program).  The status bar
 * said "starting" for ever and every command waited on it in silence.  A start with a
 * deadline (a shared server, which answers at once when it is one) is abandoned when
 * it passes it, and said.
 *
 * No `vscode` import: unit-tested with fake clients.
 */

import { realTimers, type Timers } from "./debounce";

export type { Timers };

/** What the lifecycle needs of a language client. */
export interface Startable {
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** A client about to start, and how to make its start end early. */
export interface Launch<C extends Startable> {
  client: C;
  /** Make a start in progress fail now: kill the server process, close the socket. */
  abandon(): void;
  /** Give up on a start still not done after this long; undefined: wait for it. */
  deadlineMs?: number;
}

/** A start that got no answer within its deadline. */
export class StartTimeout extends Error {
  constructor(readonly ms: number) {
    super(`no answer in ${ms / 1000} s`);
    this.name = "StartTimeout";
  }
}

/** How long a stop waits for an abandoned start to end before it goes on regardless. */
export const ABANDON_WAIT_MS = 5000;

interface Attempt<C extends Startable> {
  launch: Launch<C>;
  abandoned: boolean;
  timedOut: boolean;
  finished?: Promise<C | undefined>;
}

export class Lifecycle<C extends Startable> {
  private running: C | undefined;
  private starting: Promise<C | undefined> | undefined;
  private attempt: Attempt<C> | undefined;

  /**
   * `launch` makes the next client (undefined when it cannot: it said why); `started`
   * and `failed` are told once per start (however many callers share it), and neither
   * for an abandoned one.
   */
  constructor(private readonly launch: () => Launch<C> | undefined,
              private readonly hooks: { started?: (client: C) => void; failed: (error: unknown) => void },
              private readonly timers: Timers = realTimers) {}

  /** The client whose start succeeded, until the next stop. */
  get client(): C | undefined {
    return this.running;
  }

  /**
   * The client, once the start under way (if any) has ended; undefined where there is
   * neither (never started, stopped, or a stop under way).  Starts nothing: a setting
   * changed while a server starts must reach that server once it has started (its
   * settings were taken at its launch), and must start no server of its own.
   */
  whenStarted(): Promise<C | undefined> | undefined {
    return this.running ? Promise.resolve(this.running) : this.starting;
  }

  /** Start a client (once: concurrent callers share the start); undefined if it failed. */
  start(): Promise<C | undefined> {
    if (this.starting) return this.starting;
    const started = this.run();
    // a launch refused at once (a server address with no port) reset `starting` inside
    // run(), and `??=` set it back to that settled failure: every later command got it,
    // and said nothing, until a restart
    if (this.attempt !== undefined) this.starting = started;
    return started;
  }

  /** Stop the client, or abandon the one starting and wait (a while) until its start ended. */
  async stop(): Promise<void> {
    const client = this.running;
    const attempt = this.attempt;
    this.running = undefined;
    this.starting = undefined;
    this.attempt = undefined;
    if (attempt) {
      attempt.abandoned = true;
      attempt.launch.abandon();
      let timer: unknown;
      await Promise.race([attempt.finished,
                          new Promise<void>((resolve) => { timer = this.timers.setTimeout(resolve, ABANDON_WAIT_MS); })]);
      this.timers.clearTimeout(timer);
    }
    if (client) await client.stop().catch(() => undefined);
  }

  private run(): Promise<C | undefined> {
    const launch = this.launch();
    if (!launch) {
      this.starting = undefined;
      return Promise.resolve(undefined);
    }
    const attempt: Attempt<C> = { launch, abandoned: false, timedOut: false };
    this.attempt = attempt;
    attempt.finished = this.settle(attempt);
    return attempt.finished;
  }

  private async settle(attempt: Attempt<C>): Promise<C | undefined> {
    const { client, deadlineMs } = attempt.launch;
    const timer = deadlineMs === undefined ? undefined : this.timers.setTimeout(() => {
      attempt.timedOut = true;
      attempt.launch.abandon();
    }, deadlineMs);
    let error: unknown;
    let ok = false;
    try {
      await client.start();
      ok = true;
    } catch (caught) {
      error = caught;
    } finally {
      if (timer !== undefined) this.timers.clearTimeout(timer);
    }
    if (attempt.abandoned || attempt.timedOut) {
      // it started all the same (abandoned too late): it must not run on, unowned
      if (ok) await client.stop().catch(() => undefined);
      if (attempt.abandoned) return undefined;  // a stop asked for it: nothing to say
      error = new StartTimeout(deadlineMs!);
      ok = false;
    }
    this.attempt = undefined;
    if (!ok) {
      this.starting = undefined;  // the next command tries again
      this.hooks.failed(error);
      return undefined;
    }
    this.running = client;
    this.hooks.started?.(client);
    return client;
  }
}
