import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { answerAt, reachBack } from "../reach";

const at = (line: number, character: number) => ({ line, character });

describe("answerAt: where a completion request typed past is answered", () => {
  it("at the cursor, on the request's line at or after it", () => {
    assert.deepEqual(answerAt(at(2, 5), at(2, 9)), at(2, 9));
    assert.deepEqual(answerAt(at(2, 5), at(2, 5)), at(2, 5));
  });

  it("nowhere with the cursor on another line, before the request's place, or none", () => {
    assert.equal(answerAt(at(2, 5), at(3, 9)), undefined);
    assert.equal(answerAt(at(2, 5), at(2, 4)), undefined);
    assert.equal(answerAt(at(2, 5), undefined), undefined);
  });
});

describe("reachBack: an item's range for the cursor, given to the request made earlier in the word", () => {
  // `    total|`: asked at `    t|` (2:5), answered at the word's end (2:9)
  it("ends the server's range over the word typed so far where the request was made", () => {
    assert.deepEqual(reachBack({ start: at(2, 4), end: at(2, 9) }, at(2, 5), at(2, 9)),
                     { start: at(2, 4), end: at(2, 5) });
  });

  it("keeps what a range reaches past the cursor past the request's place", () => {
    assert.deepEqual(reachBack({ start: at(2, 4), end: at(2, 11) }, at(2, 5), at(2, 9)),
                     { start: at(2, 4), end: at(2, 7) });
  });

  it("leaves a range as it is when the request was answered where it was made", () => {
    assert.deepEqual(reachBack({ start: at(2, 4), end: at(2, 5) }, at(2, 5), at(2, 5)),
                     { start: at(2, 4), end: at(2, 5) });
  });

  it("refuses a range that starts after the request's place (a word begun since)", () => {
    assert.equal(reachBack({ start: at(2, 7), end: at(2, 9) }, at(2, 5), at(2, 9)), undefined);
  });

  it("refuses a range that ends before the cursor, or lies on another line", () => {
    assert.equal(reachBack({ start: at(2, 4), end: at(2, 8) }, at(2, 5), at(2, 9)), undefined);
    assert.equal(reachBack({ start: at(1, 4), end: at(2, 9) }, at(2, 5), at(2, 9)), undefined);
    assert.equal(reachBack({ start: at(2, 4), end: at(3, 0) }, at(2, 5), at(2, 9)), undefined);
  });
});
