/**
 * The language client's own restarts of a server that exited, said once, by us.
 *
 * A server that exits while running is started again by vscode-languageclient itself
 * (its default error handler: up to 4 times in 3 minutes, then it gives up).  Both
 * ends of that were said in the library's generic words: a restart that failed as two
 * notifications ("Restarting server failed" and "dlm-lsp client: couldn't create
 * connection to server", each with the bare JSON-RPC error), giving up as "The dlm-lsp
 * server crashed 5 times in the last 3 minutes ...", and neither said how to get the
 * server back.  The extension now keeps the client quiet through a restart and says
 * each end once, in its own words, with **DLM: Restart server**; a start of the
 * extension's own is said by `Lifecycle`, as before.  This class decides when.
 *
 * No `vscode` import: unit-tested without a client.
 */

/** How the client's restarting ended, when it is something to say. */
export type Ending =
  | { kind: "gaveUp" }                           // it crashed too often: not restarted again
  | { kind: "neverLoaded"; exits: number }       // it exited so often before its model loaded
  | { kind: "restartFailed"; error: unknown };   // the restart's start failed

/**
 * How many times in a row a server may exit before its model has loaded (`dlm/status`
 * said `loaded`) before it is not restarted again.  The client gives up only after 5
 * exits within 3 minutes: a server killed while it loads (the kernel's OOM killer, a
 * model too big for the machine), each load taking over 36 s, was restarted for ever,
 * in silence, the status bar turning "loading" and the machine thrashing at each load.
 */
export const MAX_EXITS_UNLOADED = 3;

export class Restarts {
  private restarting = false;
  /** Exits since the server last had its model loaded. */
  private unloadedExits = 0;

  constructor(private readonly say: (ending: Ending) => void) {}

  /**
   * The running server's connection closed: the client restarts it (`restart`, its
   * default handler's decision) unless it exited `MAX_EXITS_UNLOADED` times in a row
   * before its model loaded; giving up is said now.  Returns whether to restart.
   */
  closed(restart: boolean): boolean {
    this.unloadedExits++;
    if (restart && this.unloadedExits >= MAX_EXITS_UNLOADED) {
      this.restarting = false;
      this.say({ kind: "neverLoaded", exits: this.unloadedExits });
      return false;
    }
    this.restarting = restart;
    if (!restart) this.say({ kind: "gaveUp" });
    return restart;
  }

  /** The server has its model (dlm/status said so): its exits count anew. */
  loaded(): void {
    this.unloadedExits = 0;
  }

  /** The client runs again: the restart under way succeeded. */
  running(): void {
    this.restarting = false;
  }

  /** The extension stops the client (DLM: Restart server, a setting, deactivation): a
   *  restart that fails because of it is nothing to say. */
  stopped(): void {
    this.restarting = false;
  }

  /**
   * A start of the client failed: said if it was a restart of the client's own, once
   * however many waited on it (the client's restart and a request that asked for the
   * server meanwhile both see it fail).
   */
  startFailed(error: unknown): void {
    if (!this.restarting) return;
    this.restarting = false;
    this.say({ kind: "restartFailed", error });
  }
}
