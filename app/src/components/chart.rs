//! The dashboard's chart: remaining stock and units sold over the last minutes, drawn with
//! plotters on a canvas in the browser (the server renders the empty canvas), and its text
//! alternative: the latest figures as a table.

use crate::i18n::{number, tr};
use leptos::prelude::*;

/// One sample of the sale, for the chart.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Milliseconds since the epoch (browser clock).
    pub at_ms: f64,
    pub remaining: i64,
    /// Units taken: reservations not persisted yet, confirmed and paid orders.
    pub sold: i64,
}

/// Samples kept for the chart: ten minutes at one a second.
#[cfg(feature = "hydrate")]
pub const KEEP_SAMPLES: usize = 600;

/// Rows of the chart's table: the latest samples, newest first.
const TABLE_ROWS: usize = 10;

/// Remaining stock and units sold over the last minutes, drawn with plotters on a canvas.
#[component]
pub fn Chart(samples: RwSignal<Vec<Sample>>) -> impl IntoView {
    let canvas = NodeRef::<leptos::html::Canvas>::new();
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        let data = samples.get();
        if let Some(canvas) = canvas.get() {
            if let Err(e) = draw_chart(canvas, &data) {
                leptos::logging::warn!("chart: {e}");
            }
        }
    });
    view! {
        <figure class="chart">
            <canvas node_ref=canvas width="720" height="260" data-testid="admin-chart" data-samples=move || samples.with(Vec::len)
                role="img" aria-label=tr("chart.label")></canvas>
            <figcaption class="muted small">
                <span class="key remaining">{tr("chart.key_remaining")}</span> " " <span class="key sold">{tr("chart.key_sold")}</span>
                {tr("chart.sampling")}
            </figcaption>
            <table class="data chart-table" data-testid="chart-table">
                <caption>{tr("chart.caption")}</caption>
                <thead><tr><th scope="col">{tr("chart.seconds_ago")}</th><th scope="col">{tr("dashboard.remaining")}</th><th scope="col">{tr("console.sold")}</th></tr></thead>
                <tbody>
                    {move || samples.with(|data| {
                        let last = data.last().map_or(0.0, |s| s.at_ms);
                        data.iter().rev().take(TABLE_ROWS).map(|s| view! {
                            <tr>
                                <td>{number(((last - s.at_ms) / 1000.0).round() as i64)}</td>
                                <td>{number(s.remaining)}</td>
                                <td>{number(s.sold)}</td>
                            </tr>
                        }).collect_view()
                    })}
                </tbody>
            </table>
        </figure>
    }
}

/// A label of the chart's unit axis: a whole number of units with its separators, nothing at a
/// point between two (so no label is written twice: "2, 2, 1, 0, 0" was a 3-unit sale's axis).
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
pub fn y_label(y: f64) -> String {
    let whole = y.round();
    match (y - whole).abs() < 1e-6 {
        true => number(whole as i64),
        false => String::new(),
    }
}

#[cfg(feature = "hydrate")]
pub fn draw_chart(canvas: web_sys::HtmlCanvasElement, data: &[Sample]) -> Result<(), String> {
    use plotters::prelude::*;
    use plotters_canvas::CanvasBackend;
    let backend = CanvasBackend::with_canvas_object(canvas).ok_or("no 2d context")?;
    let root = backend.into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let last = data.last().map_or(0.0, |s| s.at_ms);
    let first = data.first().map_or(0.0, |s| s.at_ms);
    let span = ((last - first) / 1000.0).max(10.0);
    let top = data
        .iter()
        .map(|s| s.remaining.max(s.sold))
        .max()
        .unwrap_or(1)
        .max(1);
    let axis = crate::format::ticks(top, 5);
    let top = *axis.last().unwrap_or(&top) as f64;
    let mut chart = ChartBuilder::on(&root)
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(-span..0.0, 0.0..top)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc(crate::i18n::tr("chart.axis_seconds"))
        .y_desc(crate::i18n::tr("chart.axis_units"))
        .x_label_formatter(&|x| format!("{:.0}", x.abs()))
        .y_labels(axis.len())
        .y_label_formatter(&|y| y_label(*y))
        .draw()
        .map_err(|e| e.to_string())?;
    let at = |s: &Sample| (s.at_ms - last) / 1000.0;
    let remaining_color = RGBColor(37, 99, 235);
    let sold_color = RGBColor(21, 128, 61);
    chart
        .draw_series(LineSeries::new(
            data.iter().map(|s| (at(s), s.remaining as f64)),
            remaining_color.stroke_width(2),
        ))
        .map_err(|e| e.to_string())?;
    chart
        .draw_series(LineSeries::new(
            data.iter().map(|s| (at(s), s.sold as f64)),
            sold_color.stroke_width(2),
        ))
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_axis_labels_whole_units_once() {
        // Where plotters may put five labels over a 3-unit axis.
        let labels: Vec<String> = [0.0, 0.75, 1.5, 2.25, 3.0]
            .into_iter()
            .map(y_label)
            .collect();
        assert_eq!(labels, ["0", "", "", "", "3"]);
        let labels: Vec<String> = [0.0, 1.0, 2.0, 3.0].into_iter().map(y_label).collect();
        assert_eq!(labels, ["0", "1", "2", "3"]);
        assert_eq!(y_label(5_000.0), "5,000");
    }
}
