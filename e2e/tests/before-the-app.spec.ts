import { BrowserContext, CDPSession, expect, Page, request as playwrightRequest, test } from "@playwright/test";
import { baseURL } from "../playwright.config";
import { captchaAnswer, createActivity, MERCHANT, register, signUpShopper, uniqueName } from "./helpers";

/**
 * The page as a shopper on a slow phone gets it: the CPU 6× slower, and the wasm app held back
 * until `start()` is called, so that the typing surely happens before the app runs.
 */
async function slowPhone(page: Page, context: BrowserContext): Promise<{ start: () => void; cdp: CDPSession }> {
  const cdp = await context.newCDPSession(page);
  await cdp.send("Emulation.setCPUThrottlingRate", { rate: 6 });
  let start!: () => void;
  const started = new Promise<void>((resolve) => (start = resolve));
  await page.route("**/*.wasm", async (route) => {
    await started;
    await route.continue();
  });
  return { start, cdp };
}

/** The app has not started: nothing has hydrated the page yet. */
async function expectNotStarted(page: Page): Promise<void> {
  expect(await page.locator("body[data-hydrated]").count(), "the app started before the typing ended").toBe(0);
}

async function expectStarted(page: Page): Promise<void> {
  await expect(page.locator("body[data-hydrated=true]")).toHaveCount(1, { timeout: 45_000 });
}

/** Where the caret is in the focused field: [its testid, selectionStart, selectionEnd]. */
async function caret(page: Page): Promise<[string | null, number | null, number | null]> {
  return page.evaluate(() => {
    const el = document.activeElement as HTMLInputElement | null;
    return [el?.getAttribute("data-testid") ?? null, el?.selectionStart ?? null, el?.selectionEnd ?? null];
  });
}

test.describe("typing before the app starts, on a 6× slower CPU", () => {
  test.setTimeout(120_000);

  test("sign-in keeps the username and password typed, focus and caret, and the app signs in with them", async ({ page, context }) => {
    const username = uniqueName("early");
    const api = await playwrightRequest.newContext({ baseURL });
    await register(api, username, "early-password");
    await api.dispose();
    const { start, cdp } = await slowPhone(page, context);
    await page.goto("/login");
    await page.getByTestId("login-password").pressSequentially("early-password");
    await page.getByTestId("login-username").pressSequentially(username);
    // The caret two characters back from the end, as a shopper correcting a typo leaves it.
    await page.keyboard.press("ArrowLeft");
    await page.keyboard.press("ArrowLeft");
    await expectNotStarted(page);

    start();
    await expectStarted(page);
    await expect(page.getByTestId("login-username")).toHaveValue(username);
    await expect(page.getByTestId("login-password")).toHaveValue("early-password");
    expect(await caret(page)).toEqual(["login-username", username.length - 2, username.length - 2]);
    await cdp.send("Emulation.setCPUThrottlingRate", { rate: 1 });

    // The app holds what was typed: its own post (the JSON API) signs in.
    const posted = page.waitForRequest((r) => r.url().endsWith("/api/auth/login"));
    await page.getByTestId("login-submit").click();
    expect((await posted).postDataJSON()).toMatchObject({ username, password: "early-password" });
    await expect(page.getByTestId("current-user")).toHaveText(username);
  });

  test("sign-up keeps both fields, and the app creates the account from them", async ({ page, context }) => {
    const username = uniqueName("early");
    const { start, cdp } = await slowPhone(page, context);
    const pictures: string[] = [];
    page.on("request", (r) => { if (r.url().includes("/register/captcha")) pictures.push(r.url()); });
    await page.goto("/register");
    await expect(page.getByTestId("signup-captcha-image")).toBeHidden();
    await page.getByTestId("register-username").pressSequentially(username);
    await page.getByTestId("register-password").pressSequentially("early-password");
    await expectNotStarted(page);

    start();
    await expectStarted(page);
    await expect(page.getByTestId("register-username")).toHaveValue(username);
    await expect(page.getByTestId("register-password")).toHaveValue("early-password");
    expect((await caret(page))[0]).toBe("register-password");
    await cdp.send("Emulation.setCPUThrottlingRate", { rate: 1 });
    const posted = page.waitForRequest((r) => r.url().endsWith("/api/auth/register"));
    await page.getByTestId("register-submit").click();
    expect((await posted).postDataJSON()).toMatchObject({ username, password: "early-password" });
    await expect(page.getByTestId("current-user")).toHaveText(username);
    // A browser that runs scripts never fetched the picture meant for one that does not.
    expect(pictures).toEqual([]);
  });

  test("the new-sale form keeps the merchant's title, description and stock", async ({ page, context }) => {
    const login = await page.request.post("/api/auth/login", { data: MERCHANT });
    expect(login.status()).toBe(200);
    const { start } = await slowPhone(page, context);
    await page.goto("/admin/activities/new");
    await page.getByTestId("admin-field-title").pressSequentially("Early phone");
    await page.getByTestId("admin-field-description").pressSequentially("Typed before the app ran.");
    await page.getByTestId("admin-field-stock").fill("");
    await page.getByTestId("admin-field-stock").pressSequentially("77");
    await expectNotStarted(page);

    start();
    await expectStarted(page);
    await expect(page.getByTestId("admin-field-title")).toHaveValue("Early phone");
    await expect(page.getByTestId("admin-field-description")).toHaveValue("Typed before the app ran.");
    await expect(page.getByTestId("admin-field-stock")).toHaveValue("77");
    expect((await caret(page))[0]).toBe("admin-field-stock");
    // The app's draft holds them: typing on appends to what was typed before.
    await page.getByTestId("admin-field-title").press("End");
    await page.getByTestId("admin-field-title").pressSequentially(" 2");
    await expect(page.getByTestId("admin-field-title")).toHaveValue("Early phone 2");
  });

  test("the quantity typed before the app starts is the quantity bought", async ({ page, context }) => {
    const id = await createActivity({ stock: 20, perUserLimit: 5 });
    await signUpShopper(page);
    const { start, cdp } = await slowPhone(page, context);
    await page.goto(`/activities/${id}`);
    await expect(page.getByTestId("app-starting")).toBeVisible();
    await expect(page.getByTestId("needs-scripts")).toBeHidden();
    const quantity = page.locator("#quantity");
    await quantity.fill("3");
    await expectNotStarted(page);

    start();
    await expectStarted(page);
    await expect(page.getByTestId("app-starting")).toHaveCount(0);
    await expect(quantity).toHaveValue("3");
    await cdp.send("Emulation.setCPUThrottlingRate", { rate: 1 });
    const bought = page.waitForRequest((r) => r.method() === "POST" && /\/api\/activities\/\d+\/buy/.test(r.url()));
    await expect(page.getByTestId("buy-button")).toBeEnabled({ timeout: 30_000 });
    await page.getByTestId("buy-button").click();
    expect((await bought).postDataJSON().quantity).toBe(3);
  });
});

test.describe("with JavaScript off", () => {
  test.use({ javaScriptEnabled: false });

  test("a shopper signs up with the picture, signs out and in, asks for a reminder and switches language", async ({ page, context }) => {
    const username = uniqueName("nojs");
    const password = "no-scripts-password";

    // Sign-up: the picture stands in for the browser's proof of work.
    await page.goto("/register");
    await expect(page.getByTestId("signup-captcha-image")).toBeVisible();
    const captchaId = await expect
      .poll(async () => (await context.cookies()).find((c) => c.name === "signup_captcha")?.value ?? "")
      .not.toBe("")
      .then(async () => (await context.cookies()).find((c) => c.name === "signup_captcha")!.value);
    // A wrong answer first: the server's refusal, rendered, with the username kept.
    await page.getByTestId("register-username").fill(username);
    await page.getByTestId("register-password").fill(password);
    await page.getByTestId("signup-captcha-input").fill("wrong");
    await page.getByTestId("register-submit").click();
    await expect(page).toHaveURL(/\/register\?error=captcha_invalid/);
    await expect(page.getByTestId("form-error")).toContainText("the captcha answer is wrong");
    await expect(page.getByTestId("register-username")).toHaveValue(username);
    expect(captchaId).not.toBe("");
    const nextId = await expect
      .poll(async () => (await context.cookies()).find((c) => c.name === "signup_captcha")?.value ?? "")
      .not.toBe(captchaId)
      .then(async () => (await context.cookies()).find((c) => c.name === "signup_captcha")!.value);
    await page.getByTestId("register-password").fill(password);
    await page.getByTestId("signup-captcha-input").fill(captchaAnswer(nextId));
    await page.getByTestId("register-submit").click();
    await expect(page).toHaveURL("/");
    const me = await page.request.get("/api/me");
    expect(me.status()).toBe(200);
    expect((await me.json()).username).toBe(username);

    // Sign-out: the header offers its form to a browser without scripts.
    await page.getByTestId("logout-form-button").click();
    await expect(page).toHaveURL("/login");
    expect((await page.request.get("/api/me")).status()).toBe(401);

    // Sign-in, back to the sale it came from.
    const id = await createActivity({ startsInSecs: 3600 });
    await page.goto(`/activities/${id}`);
    await page.getByTestId("reminder-ask").click();
    await expect(page).toHaveURL(new RegExp(`/login\\?next=%2Factivities%2F${id}$`));
    await page.getByTestId("login-username").fill(username);
    await page.getByTestId("login-password").fill(password);
    await page.getByTestId("login-submit").click();
    await expect(page).toHaveURL(`/activities/${id}`);

    // The reminder.
    await page.getByTestId("reminder-ask").click();
    await expect(page).toHaveURL(`/activities/${id}?reminder=set`);
    await expect(page.getByTestId("reminder-set")).toBeVisible();
    const mine = await (await page.request.get(`/api/activities/${id}/reminder`)).json();
    expect(mine.reminder?.activity_id).toBe(id);

    // The language, and back.
    await page.getByTestId("language-zh-CN").click();
    await expect(page.locator("html")).toHaveAttribute("lang", "zh-CN");
    await expect(page).toHaveURL(`/activities/${id}?reminder=set`);
    await page.getByTestId("language-en").click();
    await expect(page.locator("html")).toHaveAttribute("lang", "en");
  });

  test("a live sale's page says the buy needs JavaScript", async ({ page }) => {
    const id = await createActivity({ stock: 5 });
    await page.goto(`/activities/${id}`);
    await expect(page.getByTestId("needs-scripts")).toBeVisible();
    await expect(page.getByTestId("needs-scripts")).toContainText("Buying needs JavaScript");
    await expect(page.getByTestId("app-starting")).toBeHidden();
  });
});
