//! The forms a browser posts without the app (docs/api.md "Forms without scripts"): sign-up with
//! the image captcha, sign-in, sign-out and the reminder; each answers a redirect, to where the
//! shopper was going or back to its page with the refusal, which the page renders.

use crate::helpers::*;
use reqwest::{redirect::Policy, Client, Response};
use serde_json::json;

const PASSWORD: &str = "form-password-1";

/// A browser with scripts off: it keeps cookies and shows redirects (not follows them).
fn browser() -> Client {
    Client::builder()
        .cookie_store(true)
        .redirect(Policy::none())
        .build()
        .unwrap()
}

async fn post_form(
    app: &TestApp,
    browser: &Client,
    path: &str,
    fields: &[(&str, &str)],
) -> Response {
    browser
        .post(app.url(path))
        .form(fields)
        .send()
        .await
        .unwrap()
}

/// The page at `path` (where a refused form sends the browser back), as the browser gets it.
async fn page_of(app: &TestApp, browser: &Client, path: &str) -> String {
    browser
        .get(app.url(path))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

fn location(resp: &Response) -> String {
    assert_eq!(resp.status().as_u16(), 303, "{resp:?}");
    assert_eq!(resp.headers()["cache-control"], "no-store");
    resp.headers()["location"].to_str().unwrap().to_string()
}

/// The id and answer of the captcha the sign-up page's picture showed this browser, the answer
/// read where the server keeps it.
async fn captcha_shown(app: &TestApp, browser: &Client) -> (String, String) {
    let resp = browser
        .get(app.url("/register/captcha"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.headers()["content-type"], "image/png");
    assert_eq!(resp.headers()["cache-control"], "no-store");
    let cookie = resp
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("signup_captcha="))
        .expect("the captcha's cookie")
        .to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("Path=/register"),
        "{cookie}"
    );
    let id = cookie
        .strip_prefix("signup_captcha=")
        .and_then(|c| c.split(';').next())
        .unwrap()
        .to_string();
    let png = resp.bytes().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    let answer: Option<String> = redis::cmd("GET")
        .arg(app.redis.keys.captcha(&id))
        .query_async(&mut app.redis.conn())
        .await
        .unwrap();
    (id, answer.expect("the captcha's answer is kept"))
}

async fn me(app: &TestApp, browser: &Client) -> (u16, serde_json::Value) {
    json(browser.get(app.url("/api/me")).send().await.unwrap()).await
}

#[tokio::test]
async fn a_sign_up_without_scripts_answers_the_picture_and_a_wrong_answer_comes_back_rendered() {
    // Sign-ups ask a bot check here: without scripts, the picture is it.
    let app = spawn_app_with(|c| c.doors.signup_pow_difficulty = 2_000).await;
    let shopper = browser();
    let name = unique_name("form");

    // No picture answered, then a wrong answer: back to the page, with the username kept and
    // no account made.
    let back = location(
        &post_form(
            &app,
            &shopper,
            "/register",
            &[("username", &name), ("password", PASSWORD)],
        )
        .await,
    );
    assert!(
        back.starts_with("/register?error=captcha_invalid"),
        "{back}"
    );
    captcha_shown(&app, &shopper).await;
    let back = location(
        &post_form(
            &app,
            &shopper,
            "/register",
            &[
                ("username", &name),
                ("password", PASSWORD),
                ("captcha_answer", "wrong"),
                ("next", "/orders"),
            ],
        )
        .await,
    );
    assert_eq!(
        back,
        format!("/register?error=captcha_invalid&username={name}&next=%2Forders")
    );
    let made: i64 = sqlx::query_scalar("SELECT count(*) FROM users WHERE username = $1")
        .bind(&name)
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(made, 0);
    // The page it comes back to says why, in its language, and keeps the username.
    let page = page_of(&app, &shopper, &back).await;
    assert!(
        page.contains("the captcha answer is wrong or was already used"),
        "{page}"
    );
    assert!(page.contains(&format!(r#"value="{name}""#)), "{page}");
    assert!(
        page.contains(r#"action="/register""#) && page.contains(r#"method="post""#),
        "{page}"
    );
    assert!(
        page.contains("/register/captcha"),
        "the picture check for browsers without scripts"
    );

    // The right answer (case aside): an account, signed in, and on to where it was going.
    let (_, answer) = captcha_shown(&app, &shopper).await;
    let resp = post_form(
        &app,
        &shopper,
        "/register",
        &[
            ("username", &name),
            ("password", PASSWORD),
            ("captcha_answer", &answer.to_uppercase()),
            ("next", "/orders"),
        ],
    )
    .await;
    assert_eq!(location(&resp), "/orders");
    let (status, user) = me(&app, &shopper).await;
    assert_eq!(
        (status, user["username"].as_str()),
        (200, Some(name.as_str())),
        "{user}"
    );

    // A picture answers once: spent, right or wrong (its cookie sent again by hand: the post
    // clears it).
    let (id, answer) = captcha_shown(&app, &browser()).await;
    for expected in ["/", "/register?error=captcha_invalid"] {
        let resp = Client::builder()
            .redirect(Policy::none())
            .build()
            .unwrap()
            .post(app.url("/register"))
            .header("cookie", format!("signup_captcha={id}"))
            .form(&[
                ("username", unique_name("form").as_str()),
                ("password", PASSWORD),
                ("captcha_answer", &answer),
            ])
            .send()
            .await
            .unwrap();
        let to = location(&resp);
        assert!(
            to == expected || to.starts_with(&format!("{expected}&")),
            "{to} is not {expected}"
        );
    }
}

#[tokio::test]
async fn sign_in_and_out_without_scripts_go_where_the_shopper_was_going() {
    let app = spawn_app().await;
    let name = unique_name("form");
    assert_eq!(app.register(&name, PASSWORD).await.status().as_u16(), 201);
    let shopper = browser();

    // A wrong password: back with the refusal and the username, never the password.
    let back = location(
        &post_form(
            &app,
            &shopper,
            "/login",
            &[
                ("username", &name),
                ("password", "wrong-password"),
                ("next", "/orders"),
            ],
        )
        .await,
    );
    assert_eq!(
        back,
        format!("/login?error=invalid_credentials&username={name}&next=%2Forders")
    );
    let page = page_of(&app, &shopper, &back).await;
    assert!(page.contains("wrong username or password"), "{page}");
    assert!(page.contains(r#"name="next" value="/orders""#), "{page}");
    // Bad input names its field; a post without the fields says so.
    let back = location(
        &post_form(
            &app,
            &shopper,
            "/login",
            &[("username", "x"), ("password", PASSWORD)],
        )
        .await,
    );
    assert!(
        back.starts_with("/login?error=invalid_input&field=username"),
        "{back}"
    );
    let page = page_of(&app, &shopper, &back).await;
    assert!(page.contains("A username is 3 to 32 letters"), "{page}");
    let back = location(&post_form(&app, &shopper, "/login", &[("password", PASSWORD)]).await);
    assert!(
        back.starts_with("/login?error=invalid_input&field=form"),
        "{back}"
    );
    assert_eq!(me(&app, &shopper).await.0, 401);

    // Another site's form: refused before anything is read.
    let resp = shopper
        .post(app.url("/login"))
        .header("sec-fetch-site", "cross-site")
        .form(&[("username", name.as_str()), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_error(resp, 403, "cross_origin").await;

    // Right: signed in, and on; never to another site.
    let resp = post_form(
        &app,
        &shopper,
        "/login",
        &[
            ("username", &name),
            ("password", PASSWORD),
            ("next", "//evil.example"),
        ],
    )
    .await;
    assert_eq!(location(&resp), "/");
    assert_eq!(me(&app, &shopper).await.0, 200);

    // Sign-out: the session ends, to the sign-in page.
    let resp = post_form(&app, &shopper, "/logout", &[]).await;
    assert_eq!(location(&resp), "/login");
    assert_eq!(me(&app, &shopper).await.0, 401);
}

#[tokio::test]
async fn a_reminder_without_scripts_signs_a_visitor_in_first_and_comes_back_set() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let now = chrono::Utc::now();
    let sale = live_activity(
        &app,
        &merchant,
        10,
        json!({
            "starts_at": (now + chrono::Duration::hours(2)).to_rfc3339(),
            "ends_at": (now + chrono::Duration::hours(3)).to_rfc3339(),
        }),
    )
    .await;
    let id = sale["id"].as_i64().unwrap();
    let form = format!("/activities/{id}/reminder");
    let shopper = browser();

    // A visitor: to the sign-in page, which comes back to the sale.
    let resp = post_form(&app, &shopper, &form, &[]).await;
    assert_eq!(location(&resp), format!("/login?next=%2Factivities%2F{id}"));

    let name = unique_name("form");
    assert_eq!(app.register(&name, PASSWORD).await.status().as_u16(), 201);
    let resp = post_form(
        &app,
        &shopper,
        "/login",
        &[
            ("username", &name),
            ("password", PASSWORD),
            ("next", &format!("/activities/{id}")),
        ],
    )
    .await;
    assert_eq!(location(&resp), format!("/activities/{id}"));
    let resp = post_form(&app, &shopper, &form, &[]).await;
    assert_eq!(location(&resp), format!("/activities/{id}?reminder=set"));
    let (status, mine) = json(
        shopper
            .get(app.url(&format!("/api/activities/{id}/reminder")))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{mine}");
    assert_eq!(mine["reminder"]["activity_id"], id, "{mine}");
    let page = page_of(&app, &shopper, &format!("/activities/{id}?reminder=set")).await;
    assert!(page.contains(r#"data-testid="reminder-set""#), "{page}");

    // A sale that has started takes no reminder: back to it, with the refusal rendered.
    let live = live_activity(&app, &merchant, 10, json!({})).await;
    let live_id = live["id"].as_i64().unwrap();
    let resp = post_form(
        &app,
        &shopper,
        &format!("/activities/{live_id}/reminder"),
        &[],
    )
    .await;
    let back = location(&resp);
    assert_eq!(back, format!("/activities/{live_id}?error=already_started"));
}
