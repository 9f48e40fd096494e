import { expect, Page } from "@playwright/test";

/** A username no other test (or earlier run) has used. */
export function uniqueName(prefix: string): string {
  return `${prefix}_${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
}

/** Opens a page and waits until the wasm app has hydrated it (it sets `data-hydrated` on <body>). */
export async function openHydrated(page: Page, path: string): Promise<void> {
  await page.goto(path);
  await expect(page.locator("body[data-hydrated=true]")).toHaveCount(1);
}

/**
 * Collects every error the page logs or throws. A visitor's `GET /api/me` answers 401 by design
 * (API.md), and Chromium logs every non-2xx fetch: that one expected answer is not collected.
 */
export function failOnConsoleErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on("console", (msg) => {
    if (msg.type() !== "error") return;
    const expectedVisitor401 = msg.location().url.endsWith("/api/me") && msg.text().includes("401");
    if (!expectedVisitor401) errors.push(msg.text());
  });
  page.on("pageerror", (err) => errors.push(String(err)));
  return errors;
}
