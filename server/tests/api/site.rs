//! Server-rendered pages: readable without wasm, the same for everyone, cacheable for a moment.

use crate::helpers::*;
use serde_json::json;

#[tokio::test]
async fn an_activity_page_is_rendered_with_its_data_and_without_per_user_data() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let id = live_activity(
        &app,
        &merchant,
        7,
        json!({"title": "Phone</title><script>alert(1)</script> & <b>more</b>"}),
    )
    .await["id"]
        .as_i64()
        .unwrap();
    let shopper = shoppers(&app, 1).await.remove(0);
    let username: String = sqlx::query_scalar("SELECT username FROM users WHERE id = $1")
        .bind(shopper.id)
        .fetch_one(&app.db)
        .await
        .unwrap();

    let anonymous = reqwest::Client::new()
        .get(app.url(&format!("/activities/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status().as_u16(), 200);
    assert_eq!(anonymous.headers()["cache-control"], "public, max-age=5");
    let anonymous = anonymous.text().await.unwrap();
    let signed_in = shopper
        .client
        .get(app.url(&format!("/activities/{id}")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();

    // The title is in the HTML as text, never as markup: not in the heading, not in <title>.
    assert!(anonymous.contains("Phone&lt;/title&gt;&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;more&lt;/b&gt;"), "{anonymous}");
    assert!(!anonymous.contains("<script>alert(1)"), "{anonymous}");
    assert!(!anonymous.contains("<b>more</b>"), "{anonymous}");
    assert!(anonymous.contains(r#"data-testid="countdown""#));
    // Nothing about the shopper: the page a CDN caches is everybody's page.
    assert!(!signed_in.contains(&username));
    assert!(!signed_in.contains(r#"data-testid="current-user""#));

    let missing = reqwest::Client::new()
        .get(app.url("/activities/999999"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(missing.contains("No such sale"));
    let login = reqwest::Client::new()
        .get(app.url("/login"))
        .send()
        .await
        .unwrap();
    assert_eq!(login.headers()["cache-control"], "no-cache");
}

#[tokio::test]
async fn every_answer_carries_the_security_headers() {
    let app = spawn_app().await;
    for path in [
        "/",
        "/login",
        "/register",
        "/admin",
        "/no-such-page",
        "/api/time",
        "/api/no-such-thing",
        "/healthz",
    ] {
        let resp = reqwest::Client::new()
            .get(app.url(path))
            .send()
            .await
            .unwrap();
        let h = resp.headers();
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(
            h["referrer-policy"], "strict-origin-when-cross-origin",
            "{path}"
        );
        assert_eq!(h["x-frame-options"], "DENY", "{path}");
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
    }
}

#[tokio::test]
async fn html_pages_allow_only_their_own_nonced_inline_script() {
    let app = spawn_app().await;
    let mut nonces = Vec::new();
    for path in ["/", "/", "/login", "/no-such-page"] {
        let resp = reqwest::Client::new()
            .get(app.url(path))
            .send()
            .await
            .unwrap();
        let csp = resp.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .to_string();
        let html = resp.text().await.unwrap();
        let nonce = csp
            .split("'nonce-")
            .nth(1)
            .and_then(|r| r.split('\'').next())
            .expect("a nonce in the policy")
            .to_string();
        assert!(
            csp.contains("'wasm-unsafe-eval'") && !csp.contains("'unsafe-inline'"),
            "{path}: {csp}"
        );
        assert!(
            csp.contains("default-src 'self'") && csp.contains("object-src 'none'"),
            "{path}: {csp}"
        );
        // Every inline script of the page carries this response's nonce, and only that one.
        let tags: Vec<&str> = html
            .split("<script")
            .skip(1)
            .map(|rest| rest.split('>').next().unwrap_or_default())
            .collect();
        assert!(!tags.is_empty(), "{path}");
        for tag in &tags {
            assert!(
                tag.contains(&format!("nonce=\"{nonce}\"")),
                "{path}: <script{tag}>"
            );
        }
        assert!(
            html.contains(&format!("<script type=\"module\" nonce=\"{nonce}\"")),
            "{path}: {html}"
        );
        nonces.push(nonce);
    }
    nonces.sort();
    nonces.dedup();
    assert_eq!(nonces.len(), 4, "a new nonce for every response");
    // JSON answers keep the strict policy without scripts.
    let api = reqwest::Client::new()
        .get(app.url("/api/time"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        api.headers()["content-security-policy"],
        "frame-ancestors 'none'; base-uri 'self'; object-src 'none'"
    );
}

#[tokio::test]
async fn a_server_whose_site_folder_lacks_the_assets_its_pages_name_refuses_to_start() {
    let app = spawn_app().await;
    let empty = std::env::temp_dir().join(format!("empty-site-{}", unique_name("s")));
    std::fs::create_dir_all(empty.join("pkg")).unwrap();
    for sub in ["check-assets", "serve"] {
        let out = server_command(&app, sub)
            .env("LEPTOS_SITE_ROOT", &empty)
            .env("SECKILL_ADDR", "127.0.0.1:0")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{sub} must refuse: {stderr}");
        assert!(
            stderr.contains("lacks") && stderr.contains(".wasm") && stderr.contains(".js"),
            "{sub} names what is missing: {stderr}"
        );
    }
    // The site this server was built with (make test builds them together) passes.
    let out = server_command(&app, "check-assets")
        .env("LEPTOS_SITE_ROOT", "../target/site")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(empty).unwrap();
}

/// The HTML of `path` as a client without scripts sees it: what is in the document itself, not
/// in a streamed `<template>` only a script would move into place (and without the empty comments
/// hydration uses as markers).
async fn html(app: &TestApp, path: &str) -> String {
    let resp = reqwest::Client::new()
        .get(app.url(path))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200, "{path}");
    let html = resp.text().await.unwrap();
    match html.find("<template") {
        Some(at) => html[..at].to_string(),
        None => html,
    }
    .replace("<!>", "")
}

/// The card of sale `id` in the storefront's HTML, on whichever page of the list it is, after
/// the name of its group.
async fn card_in_list(app: &TestApp, id: i64) -> String {
    for page in 1.. {
        let list = html(app, &format!("/?page={page}")).await;
        let link = format!(r#"href="/activities/{id}""#);
        if let Some(at) = list.find(&link) {
            let group = list[..at].rfind("data-group=").unwrap();
            let group = list[group..].split('"').nth(1).unwrap();
            return format!("{group} {}", card_of(&list, id));
        }
        assert!(
            list.contains(r#"data-testid="page-next""#),
            "no card of sale {id}"
        );
    }
    unreachable!()
}

/// The card of sale `id` in a page of the storefront's HTML.
fn card_of(list: &str, id: i64) -> String {
    let link = format!(r#"href="/activities/{id}""#);
    let at = list
        .find(&link)
        .unwrap_or_else(|| panic!("no card of sale {id}"));
    let start = list[..at].rfind("<li ").unwrap();
    let end = at + list[at..].find("</li>").unwrap();
    list[start..end].to_string()
}

#[tokio::test]
async fn the_server_html_says_each_sales_phase() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let title = unique_name("Phase");
    let sold_out = live_activity(&app, &merchant, 1, json!({"title": title})).await["id"]
        .as_i64()
        .unwrap();
    let shopper = shoppers(&app, 1).await.remove(0);
    let path = app.path(&shopper.client, sold_out).await;
    let (status, body) = json(
        app.buy(&shopper.client, sold_out, json!({"path": path}))
            .await,
    )
    .await;
    assert_eq!(status, 202, "{body}");

    let starts_at = (chrono::Utc::now() + chrono::Duration::hours(30)).to_rfc3339();
    let later = live_activity(
        &app,
        &merchant,
        5_000,
        json!({"starts_at": starts_at, "ends_at": (chrono::Utc::now() + chrono::Duration::hours(31)).to_rfc3339()}),
    )
    .await;
    let (later, starts_at) = (
        later["id"].as_i64().unwrap(),
        later["starts_at"].as_str().unwrap().to_string(),
    );

    let paused = live_activity(&app, &merchant, 3, json!({})).await["id"]
        .as_i64()
        .unwrap();
    let resp = merchant
        .post(app.url(&format!("/api/admin/activities/{paused}/pause")))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let on_sale = live_activity(&app, &merchant, 2_500, json!({})).await["id"]
        .as_i64()
        .unwrap();

    // A sold-out sale says so, on its page and on its card, with the stock line from Redis.
    let page = html(&app, &format!("/activities/{sold_out}")).await;
    assert!(page.contains(r#"data-phase="sold-out""#), "{page}");
    assert!(page.contains(">Sold out</p>"), "{page}");
    assert!(
        page.contains(r#"<strong data-testid="stock-remaining">0</strong>"#),
        "{page}"
    );
    let card = card_in_list(&app, sold_out).await;
    assert!(card.contains(">Sold out</p>"), "{card}");
    assert!(card.contains(r#"data-phase="sold-out""#), "{card}");
    // Grouped: sold out with the ended sales, behind those on sale and those to come.
    assert!(card.starts_with("Over "), "{card}");

    // A sale not started names its start: a countdown and the instant itself.
    let page = html(&app, &format!("/activities/{later}")).await;
    assert!(page.contains(r#"data-phase="upcoming""#), "{page}");
    assert!(page.contains(">Starts in 1 d 0"), "{page}");
    assert!(
        page.contains(&format!(r#"<time datetime="{starts_at}">"#)),
        "{page}"
    );
    assert!(
        page.contains(&format!("{} UTC</time>", starts_at[..19].replace('T', " "))),
        "{page}"
    );
    assert!(
        page.contains(r#"<strong data-testid="stock-remaining">5,000</strong>"#),
        "{page}"
    );
    let card = card_in_list(&app, later).await;
    assert!(
        card.starts_with("Soon ") && card.contains(r#"data-phase="upcoming""#),
        "{card}"
    );

    // A paused one says paused; one on sale says it ends.
    let page = html(&app, &format!("/activities/{paused}")).await;
    assert!(page.contains(r#"data-phase="paused""#), "{page}");
    assert!(page.contains(">Paused</p>"), "{page}");
    let card = card_in_list(&app, paused).await;
    assert!(
        card.starts_with("OnSale ") && card.contains(">Paused</p>"),
        "{card}"
    );
    let page = html(&app, &format!("/activities/{on_sale}")).await;
    assert!(page.contains(r#"data-phase="on-sale""#), "{page}");
    assert!(page.contains(">On sale — ends in "), "{page}");
    assert!(
        page.contains(r#"<strong data-testid="stock-remaining">2,500</strong>"#),
        "{page}"
    );
}

/// The storefront's HTML of `path` as a browser asking for `languages` (and sending `cookie`)
/// gets it, with its headers.
async fn page_in(
    app: &TestApp,
    path: &str,
    languages: &str,
    cookie: Option<&str>,
) -> (reqwest::header::HeaderMap, String) {
    let mut req = reqwest::Client::new()
        .get(app.url(path))
        .header("accept-language", languages);
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200, "{path}");
    let headers = resp.headers().clone();
    (headers, resp.text().await.unwrap().replace("<!>", ""))
}

#[tokio::test]
async fn the_server_writes_each_page_in_the_shoppers_language() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let starts_at = (chrono::Utc::now() + chrono::Duration::hours(30)).to_rfc3339();
    let ends_at = (chrono::Utc::now() + chrono::Duration::hours(31)).to_rfc3339();
    let sale = live_activity(
        &app,
        &merchant,
        1_200,
        json!({"starts_at": starts_at, "ends_at": ends_at, "price_cents": 200_000, "seckill_price_cents": 129_950}),
    )
    .await;
    let id = sale["id"].as_i64().unwrap();
    let path = format!("/activities/{id}");

    // Chinese first in Accept-Language: the page is Chinese before any script runs, with its
    // numbers, price and countdown as zh-CN writes them, and the one catalog the app needs.
    let (headers, zh) = page_in(&app, &path, "zh-CN,zh;q=0.9,en;q=0.8", None).await;
    assert!(zh.contains(r#"<html lang="zh-CN">"#), "{zh}");
    assert!(zh.contains(">US$1,299.50</span>"), "{zh}");
    assert!(zh.contains(">距开始还有 1 天 0"), "{zh}");
    assert!(zh.contains("剩余库存："), "{zh}");
    assert!(zh.contains(">1,200</strong>"), "{zh}");
    let catalog = zh.split(r#"id="seckill-i18n""#).nth(1).unwrap_or_default();
    assert!(
        catalog
            .split_once('>')
            .is_some_and(|(_, json)| json.starts_with(r#"{"tag":"zh-CN""#)),
        "{zh}"
    );
    assert!(!zh.contains(">Starts in"), "{zh}");
    let vary: Vec<&str> = headers
        .get_all("vary")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert!(
        vary.iter()
            .any(|v| v.contains("Accept-Language") && v.contains("Cookie")),
        "{vary:?}"
    );

    // English otherwise, or when none of the asked languages is ours; a language is matched by
    // its language subtag ("zh" is zh-CN).
    let (_, en) = page_in(&app, &path, "de-DE,fr;q=0.8", None).await;
    assert!(en.contains(r#"<html lang="en">"#), "{en}");
    assert!(en.contains(">$1,299.50</span>"), "{en}");
    assert!(en.contains(">Starts in 1 d 0"), "{en}");
    let (_, zh) = page_in(&app, "/", "fr, zh;q=0.5, en;q=0.4", None).await;
    assert!(zh.contains(r#"<html lang="zh-CN">"#), "{zh}");
    assert!(zh.contains("<h1>限时秒杀</h1>"), "{zh}");

    // The switch's cookie wins over the header; a cookie naming no language of ours does not.
    let (_, en) = page_in(&app, &path, "zh-CN", Some("lang=en")).await;
    assert!(en.contains(r#"<html lang="en">"#), "{en}");
    let (_, zh) = page_in(&app, &path, "zh-CN", Some("lang=tlh")).await;
    assert!(zh.contains(r#"<html lang="zh-CN">"#), "{zh}");
}

#[tokio::test]
async fn the_language_switch_remembers_the_choice_and_refuses_bad_input() {
    let app = spawn_app().await;
    let browser = reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let switch = |form: &'static str| {
        browser
            .post(app.url("/language"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form)
    };
    let resp = switch("to=zh-CN&back=%2Forders%3Fx%3D1")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 303);
    assert_eq!(resp.headers()["location"], "/orders?x=1");
    assert_eq!(resp.headers()["cache-control"], "no-store");
    let cookie = resp.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.starts_with("lang=zh-CN;"), "{cookie}");
    assert!(
        cookie.contains("Max-Age=31536000") && cookie.contains("SameSite=Lax"),
        "{cookie}"
    );
    // The browser now gets Chinese, whatever it asks for.
    let page = browser
        .get(app.url("/login"))
        .header("accept-language", "en")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains(r#"<html lang="zh-CN">"#), "{page}");

    // Back to another site: to the storefront instead.
    for back in [
        "%2F%2Fevil.example%2F",
        "https%3A%2F%2Fevil.example",
        "%2F%5Cevil.example",
    ] {
        let form: &'static str = Box::leak(format!("to=en&back={back}").into_boxed_str());
        let resp = switch(form).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 303, "{back}");
        assert_eq!(resp.headers()["location"], "/", "{back}");
    }
    // A language the storefront lacks, a form without one: 400, and nothing set.
    for form in ["to=tlh&back=%2F", "back=%2F", "to"] {
        let resp = switch(form).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 400, "{form}");
        assert!(resp.headers().get("set-cookie").is_none(), "{form}");
        let body: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(body["error"], "invalid_input", "{form}");
    }
    // Another site's form: 403.
    let resp = switch("to=en&back=%2F")
        .header("sec-fetch-site", "cross-site")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 403);
    assert!(resp.headers().get("set-cookie").is_none());
}

/// `/orders/{token}` follows a reservation token; a path that is no token is no order, and the
/// page says so instead of asking the API about it.
#[tokio::test]
async fn an_order_page_follows_a_token_and_says_a_non_token_is_no_page() {
    let app = spawn_app().await;
    let token = uuid::Uuid::new_v4();
    let tracked = html(&app, &format!("/orders/{token}")).await;
    assert!(
        tracked.contains(r#"data-testid="order-status""#),
        "{tracked}"
    );
    assert!(tracked.contains(&token.to_string()), "{tracked}");
    assert!(
        !tracked.contains(r#"data-testid="order-not-found""#),
        "{tracked}"
    );

    let refused = html(&app, "/orders/not-a-token").await;
    assert!(
        refused.contains(r#"data-testid="order-not-found""#),
        "{refused}"
    );
    assert!(refused.contains(">Page not found</p>"), "{refused}");
    assert!(
        !refused.contains(r#"data-testid="order-status""#),
        "{refused}"
    );
}

/// A hashed asset found is kept a year (`immutable`); one that is not there, as a page of the next
/// release asks an instance of this one during a rollout, is `404` and kept nowhere: a CDN or a
/// browser that kept that answer a year would break the page long after the rollout. An asset
/// of the release before, which the image carries in `pkg-previous`, is served as this release's
/// own are: a page that release rendered gets its assets from this one. The release server
/// itself (it finds its assets' hashes beside its binary).
#[tokio::test]
async fn an_asset_is_immutable_only_when_found_and_a_missing_one_is_never_kept() {
    let app = spawn_app_with(|c| c.run_workers = false).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // The site as the image lays it out: this release's assets, and the release before's in
    // pkg-previous (here one stylesheet under a name this release lacks, with its brotli copy).
    let built = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/site");
    let site = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("site-{port}"));
    let _ = std::fs::remove_dir_all(&site);
    std::fs::create_dir_all(site.join("pkg-previous")).unwrap();
    std::os::unix::fs::symlink(std::path::Path::new(built).join("pkg"), site.join("pkg")).unwrap();
    let before = "/pkg/seckill.0release-before0.css";
    let before_file = site.join(format!("pkg-previous/{}", &before[5..]));
    std::fs::write(&before_file, "body{color:#123}").unwrap();
    std::fs::write(format!("{}.br", before_file.display()), [0x0b, 0x07, 0x80]).unwrap();
    let mut server = server_command(&app, "serve")
        .env("SECKILL_ADDR", format!("127.0.0.1:{port}"))
        .env("SECKILL_NO_WORKERS", "1")
        .env("LEPTOS_SITE_ROOT", &site)
        .spawn()
        .expect("the server starts");
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let page = eventually(60, "the release server's storefront", || async {
        let resp = http.get(format!("{base}/")).send().await.ok()?;
        (resp.status() == 200).then_some(resp.text().await.ok()?)
    })
    .await;
    let css = page
        .split('"')
        .find(|s| s.starts_with("/pkg/") && s.ends_with(".css"))
        .expect("the page names its stylesheet")
        .to_string();
    let found = http.get(format!("{base}{css}")).send().await.unwrap();
    let missing = css.replace("/pkg/", "/pkg/0000");
    let absent = http.get(format!("{base}{missing}")).send().await.unwrap();
    let previous = http.get(format!("{base}{before}")).send().await.unwrap();
    let previous_status = previous.status();
    let previous_cache = previous.headers()["cache-control"].clone();
    // Read before the server stops: an answer's body may come after its head.
    let previous_text = previous.text().await.unwrap();
    let previous_br = http
        .get(format!("{base}{before}"))
        .header("accept-encoding", "br")
        .send()
        .await
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(found.status(), 200, "{css}");
    assert_eq!(
        found.headers()["cache-control"],
        "public, max-age=31536000, immutable",
        "{css}"
    );
    assert_eq!(absent.status(), 404, "{missing}");
    assert_eq!(absent.headers()["cache-control"], "no-store", "{missing}");
    // The release before's asset: found in pkg-previous, as immutable as this release's own.
    assert_eq!(previous_status, 200, "{before}");
    assert_eq!(
        previous_cache, "public, max-age=31536000, immutable",
        "{before}"
    );
    assert_eq!(previous_text, "body{color:#123}");
    assert_eq!(previous_br.status(), 200, "{before} in brotli");
    assert_eq!(previous_br.headers()["content-encoding"], "br", "{before}");
    let _ = std::fs::remove_dir_all(&site);
}

/// Servers of one process share leptos's state: starting one (it renders the app once to list its
/// routes) while another renders pages must leave every page to finish. It did not: a page whose
/// data began loading during the start waited until its request timed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_are_rendered_while_other_servers_of_the_process_start() {
    use std::sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc,
    };
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let id = live_activity(&app, &merchant, 5, json!({})).await["id"]
        .as_i64()
        .unwrap();
    let starting = Arc::new(AtomicBool::new(true));
    let rendered = Arc::new(AtomicUsize::new(0));
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(10))
        .build()
        .unwrap();
    let readers: Vec<_> = (0..6)
        .map(|reader| {
            let (starting, rendered, client) = (starting.clone(), rendered.clone(), client.clone());
            let url = match reader % 2 {
                0 => app.url("/"),
                _ => app.url(&format!("/activities/{id}")),
            };
            tokio::spawn(async move {
                loop {
                    let resp = client.get(&url).send().await;
                    let status = resp.as_ref().map(|r| r.status().as_u16());
                    assert!(matches!(status, Ok(200)), "{url}: {status:?}");
                    rendered.fetch_add(1, Ordering::Relaxed);
                    if !starting.load(Ordering::Relaxed) {
                        break;
                    }
                }
            })
        })
        .collect();
    let mut others = Vec::new();
    for _ in 0..20 {
        others.push(spawn_instance(&app.config).await);
    }
    starting.store(false, Ordering::Relaxed);
    for reader in readers {
        reader.await.expect("every page was rendered");
    }
    // Each reader rendered pages the whole time the others started.
    assert!(rendered.load(Ordering::Relaxed) > 6);
}
