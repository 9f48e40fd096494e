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

/** Fails the test on any error the page logs or throws. */
export function failOnConsoleErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on("console", (msg) => {
    if (msg.type() === "error") errors.push(msg.text());
  });
  page.on("pageerror", (err) => errors.push(String(err)));
  return errors;
}
