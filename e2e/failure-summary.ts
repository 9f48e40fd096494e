import path from "node:path";
import type { FullResult, Reporter, TestCase, TestError, TestResult } from "@playwright/test/reporter";

/**
 * The failed tests once more at the very end of the output, a few lines each: which test, what
 * it expected, and where in the tests it stood. A CI log is often read from its tail, and the
 * list reporter's own account of a failure (its attachments, traces and screenshots of every
 * open page) can push the error itself out of it.
 */
export default class FailureSummary implements Reporter {
  private failed: { test: TestCase; result: TestResult }[] = [];

  printsToStdio(): boolean {
    return false;
  }

  onTestEnd(test: TestCase, result: TestResult): void {
    if (result.status !== test.expectedStatus) this.failed.push({ test, result });
  }

  onEnd(_result: FullResult): void {
    if (this.failed.length === 0) return;
    const out = ["", `The e2e failures in short (${this.failed.length}):`];
    for (const { test, result } of this.failed) {
      const title = test.titlePath().filter(Boolean).slice(1).join(" › ");
      out.push(`✘ ${title}`);
      out.push(`  ${result.status} after ${(result.duration / 1000).toFixed(1)} s (${where(test.location.file, test.location.line)})`);
      for (const error of result.errors) out.push(...describe(error));
    }
    console.log(out.join("\n"));
  }
}

// Playwright runs from the e2e folder (the Makefile's `cd e2e`).
const here = process.cwd();
const where = (file: string, line: number) => `${path.relative(here, file)}:${line}`;
// Colours are for terminals; a log keeps them as escapes.
// eslint-disable-next-line no-control-regex
const plain = (s: string) => s.replace(/\u001b\[[0-9;]*m/g, "");

/** An error's first lines, then the frames of the tests and their helpers it passed through. */
function describe(error: TestError): string[] {
  const message = plain(error.message ?? error.value ?? "").split("\n").filter((l) => l.trim() !== "");
  const frames = plain(error.stack ?? "")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l.startsWith("at ") && l.includes(`${path.sep}tests${path.sep}`))
    .map((l) => l.replace(`${here}${path.sep}`, ""));
  return [...message.slice(0, 8), ...frames.slice(0, 3)].map((l) => `    ${l}`);
}
