//! What the shopper typed before the app started. The server renders every form, and a shopper
//! may type into it in the seconds before the wasm app takes over; hydration then writes each
//! field's value from the app's own (empty) state, which would throw the typing away. So the
//! entry point reads every field the shopper changed just before hydrating (what differs from
//! the markup's default), and after it puts each one back where the app reset it, announcing it
//! with an `input` event as typing does: the app reads the field's value into its state. Focus
//! and caret go back where they were.
//!
//! Should a part of a page hydrate after the first pass (a route's data read in a task), the
//! fields are put back again on the next two frames; a field the shopper has changed since is
//! left alone.

use leptos::prelude::{document, request_animation_frame};
use std::rc::Rc;
use wasm_bindgen::JsCast;
use web_sys::{
    Element, Event, EventInit, HtmlInputElement, HtmlSelectElement, HtmlTextAreaElement,
};

/// A field the server rendered.
enum Field {
    Input(HtmlInputElement),
    Area(HtmlTextAreaElement),
    Select(HtmlSelectElement),
}

/// What the shopper made of a field.
#[derive(Clone, PartialEq)]
enum Entry {
    Text(String),
    Checked(bool),
}

impl Field {
    fn of(el: Element) -> Option<Field> {
        let el = match el.dyn_into::<HtmlInputElement>() {
            Ok(input) => {
                let kind = input.type_();
                let typed = !matches!(
                    kind.as_str(),
                    "hidden" | "submit" | "button" | "reset" | "file" | "image"
                );
                return typed.then_some(Field::Input(input));
            }
            Err(el) => el,
        };
        match el.dyn_into::<HtmlTextAreaElement>() {
            Ok(area) => Some(Field::Area(area)),
            Err(el) => el.dyn_into::<HtmlSelectElement>().ok().map(Field::Select),
        }
    }

    fn element(&self) -> &Element {
        match self {
            Field::Input(e) => e,
            Field::Area(e) => e,
            Field::Select(e) => e,
        }
    }

    fn checkable(input: &HtmlInputElement) -> bool {
        matches!(input.type_().as_str(), "checkbox" | "radio")
    }

    /// The field as it is now.
    fn entry(&self) -> Entry {
        match self {
            Field::Input(i) if Field::checkable(i) => Entry::Checked(i.checked()),
            Field::Input(i) => Entry::Text(i.value()),
            Field::Area(a) => Entry::Text(a.value()),
            Field::Select(s) => Entry::Text(s.value()),
        }
    }

    /// The field as the markup has it.
    fn default(&self) -> Entry {
        match self {
            Field::Input(i) if Field::checkable(i) => Entry::Checked(i.default_checked()),
            Field::Input(i) => Entry::Text(i.default_value()),
            Field::Area(a) => Entry::Text(a.default_value().unwrap_or_default()),
            Field::Select(s) => {
                let options = s.options();
                let chosen = (0..options.length())
                    .filter_map(|n| options.item(n))
                    .filter_map(|o| o.dyn_into::<web_sys::HtmlOptionElement>().ok())
                    .find(|o| o.default_selected())
                    .or_else(|| {
                        options
                            .item(0)
                            .and_then(|o| o.dyn_into::<web_sys::HtmlOptionElement>().ok())
                    });
                Entry::Text(chosen.map(|o| o.value()).unwrap_or_default())
            }
        }
    }

    /// Writes `entry` into the field, and tells the app as typing would.
    fn put(&self, entry: &Entry) {
        match (self, entry) {
            (Field::Input(i), Entry::Checked(on)) => i.set_checked(*on),
            (Field::Input(i), Entry::Text(text)) => i.set_value(text),
            (Field::Area(a), Entry::Text(text)) => a.set_value(text),
            (Field::Select(s), Entry::Text(text)) => s.set_value(text),
            _ => {}
        }
        let init = EventInit::new();
        init.set_bubbles(true);
        for kind in ["input", "change"] {
            if let Ok(event) = Event::new_with_event_init_dict(kind, &init) {
                let _ = self.element().dispatch_event(&event);
            }
        }
    }

    /// The caret (or selection) of a text field.
    fn caret(&self) -> Option<(u32, u32)> {
        let (start, end) = match self {
            Field::Input(i) => (i.selection_start().ok()??, i.selection_end().ok()??),
            Field::Area(a) => (a.selection_start().ok()??, a.selection_end().ok()??),
            Field::Select(_) => return None,
        };
        Some((start, end))
    }

    fn set_caret(&self, (start, end): (u32, u32)) {
        let _ = match self {
            Field::Input(i) => i.set_selection_range(start, end),
            Field::Area(a) => a.set_selection_range(start, end),
            Field::Select(_) => Ok(()),
        };
    }
}

/// The fields the shopper changed before the app started, and where the focus was.
pub struct Typed {
    fields: Vec<(Field, Entry)>,
    /// The focused element, and its caret when it is a text field.
    focus: Option<(Element, Option<(u32, u32)>)>,
}

impl Typed {
    /// Reads the page as the shopper left it, just before the app hydrates it.
    pub fn read() -> Typed {
        let doc = document();
        let mut fields = Vec::new();
        if let Ok(all) = doc.query_selector_all("input, textarea, select") {
            for n in 0..all.length() {
                let Some(field) = all.item(n).and_then(|node| node.dyn_into::<Element>().ok())
                else {
                    continue;
                };
                if let Some(field) = Field::of(field) {
                    let entry = field.entry();
                    if entry != field.default() {
                        fields.push((field, entry));
                    }
                }
            }
        }
        let focus = doc.active_element().map(|el| {
            let caret = Field::of(el.clone()).and_then(|f| f.caret());
            (el, caret)
        });
        Typed { fields, focus }
    }

    /// Puts the typing back once hydration's own writes are done (they run as tasks queued
    /// while hydrating: a task queued after them, and one more turn, runs after them), and
    /// again on the next two frames (for what hydrated later).
    pub fn restore(self) {
        let typed = Rc::new(self);
        leptos::task::spawn_local(async move {
            leptos::task::tick().await;
            typed.put_back(true);
            request_animation_frame(move || {
                typed.put_back(false);
                request_animation_frame(move || typed.put_back(false));
            });
        });
    }

    /// One pass. Right after hydrating (`first`) every field gets its typing back, announced
    /// so that the app reads it: nothing but the app has written to a field since it was read
    /// (the shopper's keys wait for the hydration and its tasks to end). On later frames only a field the app
    /// has reset to the markup's default since does: one changed otherwise is the shopper's.
    fn put_back(&self, first: bool) {
        let mut caret_moved = first;
        for (field, typed) in &self.fields {
            let now = field.entry();
            if first || (now != *typed && now == field.default()) {
                field.put(typed);
                caret_moved |= self.is_focus(field);
            }
        }
        if caret_moved {
            self.refocus();
        }
    }

    fn is_focus(&self, field: &Field) -> bool {
        self.focus
            .as_ref()
            .is_some_and(|(el, _)| el == field.element())
    }

    /// The focus back where it was, and the caret in it (writing a value moves it to the end).
    fn refocus(&self) {
        let Some((el, caret)) = &self.focus else {
            return;
        };
        if !el.is_connected() {
            return;
        }
        let focused = document().active_element();
        if focused.as_ref() != Some(el) {
            if let Some(html) = el.dyn_ref::<web_sys::HtmlElement>() {
                let _ = html.focus();
            }
        }
        if let (Some(field), Some(caret)) = (Field::of(el.clone()), caret) {
            field.set_caret(*caret);
        }
    }
}
