//! Who is signed in, as the browser knows it. Pages are rendered without it (they stay cacheable);
//! once hydrated, the app asks `GET /api/me` and marks the document as hydrated.

use crate::api::User;
use leptos::prelude::*;

#[derive(Clone, Copy)]
pub struct Session {
    /// `None` until the browser has asked; then `Some(None)` for a visitor.
    pub user: RwSignal<Option<Option<User>>>,
    /// True once the wasm app runs: buttons that need it are enabled from then on.
    pub hydrated: RwSignal<bool>,
}

impl Session {
    pub(crate) fn provide() -> Session {
        let session = Session {
            user: RwSignal::new(None),
            hydrated: RwSignal::new(false),
        };
        provide_context(session);
        // Effects run in the browser only, after hydration.
        Effect::new(move |_| {
            session.hydrated.set(true);
            mark_hydrated();
            leptos::task::spawn_local(async move { session.refresh().await });
        });
        session
    }

    pub fn get() -> Session {
        expect_context::<Session>()
    }

    pub async fn refresh(self) {
        let user = crate::endpoints::me().await.ok();
        self.user.set(Some(user));
    }
}

fn mark_hydrated() {
    #[cfg(feature = "hydrate")]
    if let Some(body) = document().body() {
        let _ = body.set_attribute("data-hydrated", "true");
    }
}
