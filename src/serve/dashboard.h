#pragma once
// The live cluster page of `dualpath serve` (GET /dashboard, issue 34; docs/observe.md): one
// self-contained HTML document (inline CSS, inline script, SVG charts drawn by the script; no
// external asset, font or CDN) that polls GET /metrics once a second and shows every node with
// its role and lease, each storage NIC's read queue and KV bytes read by path (PE, DE) over
// time, the requests in flight, output tokens/s and TTFT p50/p99 over time.
//
// The page computes nothing the server does not export: it parses the Prometheus text of
// /metrics (api_metrics.h), so what it shows and what a scraper sees are the same values. Rates
// and windowed quantiles are its own arithmetic over successive scrapes, as Prometheus's rate()
// and histogram_quantile() are. Every string from the server is set as text (textContent), never
// parsed as HTML. Every figure taken from /metrics carries `data-metric` (the metric's name),
// `data-labels` (a JSON label filter: the figure is the sum of the matching series) and
// `data-value` (the number), so that a test can compare the page with a scrape
// (src/serve/dashboard_test.py).
//
// Thread-safe: constants built once.

#include <string>
#include <string_view>

namespace dualpath::serve {

// The page's HTML.
std::string_view dashboard_page();

// The Content-Security-Policy to serve it with: its inline script and style by their SHA-256
// (nothing else may run or style it), requests only to its own origin, no frames, no forms.
const std::string& dashboard_csp();

}  // namespace dualpath::serve
