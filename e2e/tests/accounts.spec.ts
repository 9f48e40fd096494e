import { expect, test } from "@playwright/test";
import { failOnConsoleErrors, openHydrated, uniqueName } from "./helpers";

test("a shopper registers, signs out and signs in again through the pages", async ({ page }) => {
  const errors = failOnConsoleErrors(page);
  const username = uniqueName("shopper");
  const password = "correct-horse-battery";

  await openHydrated(page, "/register");
  await page.getByTestId("register-username").fill(username);
  await page.getByTestId("register-password").fill(password);
  await page.getByTestId("register-submit").click();

  await expect(page).toHaveURL("/");
  await expect(page.getByTestId("current-user")).toHaveText(username);

  await page.getByTestId("logout-button").click();
  await expect(page).toHaveURL("/login");
  await expect(page.getByTestId("current-user")).toHaveCount(0);
  const me = await page.request.get("/api/me");
  expect(me.status()).toBe(401);

  await page.getByTestId("login-username").fill(username);
  await page.getByTestId("login-password").fill(password);
  await page.getByTestId("login-submit").click();
  await expect(page).toHaveURL("/");
  await expect(page.getByTestId("current-user")).toHaveText(username);

  // The session survives a full reload: the header asks /api/me after hydration.
  await page.reload();
  await expect(page.getByTestId("current-user")).toHaveText(username);
  expect(errors).toEqual([]);
});

test("a wrong password is refused with a message and no session", async ({ page }) => {
  await openHydrated(page, "/login");
  await page.getByTestId("login-username").fill(uniqueName("nobody"));
  await page.getByTestId("login-password").fill("not-the-password");
  await page.getByTestId("login-submit").click();
  await expect(page.getByTestId("form-error")).toContainText("wrong username or password");
  await expect(page).toHaveURL("/login");
  await expect(page.getByTestId("current-user")).toHaveCount(0);
});

test("the page hydrates: controls that need the wasm app come alive", async ({ page }) => {
  await page.goto("/login");
  // Server-rendered HTML arrives with the buttons that need the app disabled...
  await expect(page.locator("body[data-hydrated=true]")).toHaveCount(1);
  // ...and once hydrated, the show-password toggle works (an event handler from the wasm).
  const password = page.getByTestId("login-password");
  await password.fill("s3cret-pass");
  await expect(password).toHaveAttribute("type", "password");
  await expect(page.getByTestId("toggle-password")).toBeEnabled();
  await page.getByTestId("toggle-password").click();
  await expect(password).toHaveAttribute("type", "text");
  await expect(page.getByTestId("toggle-password")).toHaveAttribute("aria-pressed", "true");
  await expect(page.getByTestId("login-submit")).toBeEnabled();
});

test("the server-rendered sign-in is a form the browser can post; only the app's own controls wait for it", async ({ request }) => {
  const resp = await request.get("/login");
  expect(resp.status()).toBe(200);
  const html = await resp.text();
  expect(html).toMatch(/<form[^>]*method="post"[^>]*action="\/login"/);
  expect(html).not.toMatch(/data-testid="login-submit"[^>]*disabled|disabled[^>]*data-testid="login-submit"/);
  // The show-password toggle is the app's: disabled until it runs.
  expect(html).toMatch(/data-testid="toggle-password"[^>]*disabled|disabled[^>]*data-testid="toggle-password"/);
  expect(html).toContain('data-testid="login-username"');
});

test("an unknown page answers 404 with a page of its own", async ({ page }) => {
  const resp = await page.goto("/no-such-page");
  expect(resp?.status()).toBe(404);
  await expect(page.getByRole("heading", { name: "Page not found" })).toBeVisible();
});
