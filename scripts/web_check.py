#!/usr/bin/env python3
"""Drives `ringcap serve`'s page in headless Chromium (Debian's, through Playwright) with a
client certificate, and writes what it saw as JSON for crates/ringcap/tests/web.rs, which
compares it with `ringcap query` and tcpdump over the same store.

usage: web_check.py BASE_URL CERT KEY OUT_DIR HOSTILE_QUERY

Playwright's client_certificates makes the TLS connection itself (with the certificate the
server's --client-ca signed) and hands the browser the answers; the browser still runs the page,
its CSP, its fetches and its downloads. The server's own certificate is from the test's CA, so
HTTPS errors are ignored for it (the client certificate is what serve checks).
"""
import json
import os
import sys
import time

from playwright.sync_api import sync_playwright

BASE, CERT, KEY, OUT = sys.argv[1:5]
HOSTILE_QUERY = sys.argv[5]
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

seen = {"console": [], "foreign": [], "page_errors": []}


def wait_js(page, expr, timeout=30000):
    """Polls a JS expression from here: Playwright's wait_for_function evaluates strings inside
    the page, which the page's CSP (no 'unsafe-eval') forbids, as it should."""
    deadline = time.monotonic() + timeout / 1e3
    while not page.evaluate(expr):
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout} ms for {expr}")
        time.sleep(0.02)


def lines(page):
    return page.eval_on_selector_all("#packets li .line", "els => els.map(e => e.textContent)")


def wait_packets(page):
    wait_js(page, "document.body.dataset.packetsDone === '1'", timeout=30000)


def reset_packets(page):
    page.evaluate("delete document.body.dataset.packetsDone")


def flows_loaded(page):
    return int(page.evaluate("Number(document.body.dataset.flowsLoaded || 0)"))


def wait_flows(page, before):
    wait_js(page, f"Number(document.body.dataset.flowsLoaded || 0) > {before}", timeout=30000)


def column(page, i):
    return page.eval_on_selector_all(
        "#flows tbody tr", f"rows => rows.map(r => r.children[{i}] ? r.children[{i}].textContent : '')")


def shot(page, name):
    page.screenshot(path=os.path.join(OUT, name), full_page=True)


def main():
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=FLAGS,
                                    downloads_path=OUT)
        ctx = browser.new_context(
            viewport={"width": 1280, "height": 900},
            ignore_https_errors=True,
            accept_downloads=True,
            client_certificates=[{"origin": BASE, "certPath": CERT, "keyPath": KEY}],
        )
        page = ctx.new_page()
        page.on("console", lambda m: seen["console"].append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: seen["page_errors"].append(str(e)))
        page.on("request", lambda r: None if r.url.startswith(BASE) else seen["foreign"].append(r.url))

        started = time.monotonic()
        response = page.goto(BASE + "/")
        seen["status"] = response.status
        seen["csp"] = response.headers.get("content-security-policy", "")
        wait_js(page, "Number(document.body.dataset.flowsLoaded || 0) > 0", timeout=30000)
        seen["load_ms"] = (time.monotonic() - started) * 1e3

        # Keyboard: the expression has the focus; Tab goes through the form in order.
        order = [page.evaluate("document.activeElement.id")]
        for _ in range(11):
            page.keyboard.press("Tab")
            order.append(page.evaluate(
                "document.activeElement.id || document.activeElement.textContent.trim()"))
        seen["tab_order"] = order

        # As typed: a bad port is shown where it is; then a bad time in its own field.
        page.focus("#query")
        page.keyboard.type("host 10.0.0.1 and port nosuchport")
        page.wait_for_selector("#query-error mark", timeout=15000)
        seen["check_error"] = {
            "message": page.text_content("#query-error .message"),
            "marked": page.text_content("#query-error mark"),
            "invalid": page.get_attribute("#query", "aria-invalid"),
        }
        shot(page, "web-check-error.png")
        page.fill("#query", "")
        page.fill("#after", "yesterday-ish")
        wait_js(page, "document.getElementById('time-error').textContent.length > 0", timeout=15000)
        seen["time_error"] = page.text_content("#time-error")
        page.fill("#after", "")
        wait_js(page, "document.getElementById('check').textContent === '✓'", timeout=15000)

        # A search from the form, submitted with Enter.
        query = "udp or tcp"
        page.fill("#query", query)
        reset_packets(page)
        page.focus("#query")
        page.keyboard.press("Enter")
        wait_packets(page)
        seen["search"] = {"query": query, "lines": lines(page),
                          "first_packet_ms": float(page.evaluate("document.body.dataset.firstPacketMs"))}

        # By name: the flows whose DNS name matches, as --name; a bad pattern shown at its field.
        page.fill("#name", "*.EVIL.example")
        reset_packets(page)
        page.click("#run")
        wait_packets(page)
        seen["by_name"] = {"query": query, "name": "*.EVIL.example", "lines": lines(page)}
        page.fill("#name", "a\u0001b")
        wait_js(page, "document.getElementById('name-error').textContent.length > 0", timeout=15000)
        seen["name_error"] = page.text_content("#name-error")
        page.fill("#name", "")

        # The hostile payload: its packet's bytes show as text, and nothing of it runs.
        page.fill("#query", "tcp port 9000 and tcp[13] & 8 != 0")
        reset_packets(page)
        page.click("#run")
        wait_packets(page)
        page.click("#packets li:first-child")
        seen["hostile"] = {
            "hex": page.text_content("#hex"),
            "scripts": page.evaluate("document.scripts.length"),
            "pwned": page.evaluate("typeof window.pwned !== 'undefined'"),
            "lines": lines(page),
        }
        shot(page, "web-packets.png")
        # A hostile expression: libpcap's words about it are text too.
        page.fill("#query", HOSTILE_QUERY)
        wait_js(page, "document.getElementById('check').textContent === '✗'", timeout=15000)
        seen["hostile_query"] = {
            "error_html_children": page.evaluate(
                "Array.from(document.querySelectorAll('#query-error *')).map(e => e.tagName)"),
            "error_text": page.text_content("#query-error"),
            "scripts": page.evaluate("document.scripts.length"),
            "pwned": page.evaluate("typeof window.pwned !== 'undefined'"),
        }

        # Flows: sort by bytes (descending first, then ascending), by source; filter a column.
        page.fill("#query", "")
        heads = page.eval_on_selector_all("#flow-heads th", "ths => ths.map(t => t.dataset.col)")
        i_bytes, i_src, i_dport = heads.index("bytes"), heads.index("src"), heads.index("dst_port")
        seen["flows_default"] = column(page, i_bytes)
        n = flows_loaded(page)
        page.click("#flow-heads th[data-col=bytes] button")  # was descending: now ascending
        wait_flows(page, n)
        seen["bytes_asc"] = column(page, i_bytes)
        seen["bytes_sort"] = page.get_attribute("#flow-heads th[data-col=bytes]", "aria-sort")
        n = flows_loaded(page)
        page.click("#flow-heads th[data-col=src] button")
        wait_flows(page, n)
        seen["src_asc"] = column(page, i_src)
        n = flows_loaded(page)
        page.fill("#flow-filters input[data-col=dst_port]", "53")
        wait_flows(page, n)
        seen["dport_53"] = column(page, i_dport)
        seen["flows_info"] = page.text_content("#flows-info")
        shot(page, "web-flows.png")
        n = flows_loaded(page)
        page.fill("#flow-filters input[data-col=dst_port]", "")
        wait_flows(page, n)
        # Paging: 25 a page.
        n = flows_loaded(page)
        page.click("#next")
        wait_flows(page, n)
        seen["page2"] = page.text_content("#page-info")
        n = flows_loaded(page)
        page.click("#prev")
        wait_flows(page, n)

        # A row opens its flow (keyboard: focus it, Enter).
        n = flows_loaded(page)
        page.click("#flow-heads th[data-col=bytes] button")  # descending again
        wait_flows(page, n)
        reset_packets(page)
        page.focus("#flows tbody tr.openable")
        page.keyboard.press("Enter")
        wait_packets(page)
        seen["open_flow"] = {"query": page.input_value("#query"), "after": page.input_value("#after"),
                             "before": page.input_value("#before"), "lines": lines(page)}
        shot(page, "web-flow-opened.png")

        # Download PCAP of a query: the browser's own download of the form's POST.
        page.fill("#query", "udp or tcp")
        page.fill("#after", "")
        page.fill("#before", "")
        with page.expect_download(timeout=30000) as d:
            page.click("#download")
        download = d.value
        path = os.path.join(OUT, "downloaded.pcap")
        download.save_as(path)
        seen["download"] = {"query": "udp or tcp", "path": path, "name": download.suggested_filename}
        with page.expect_download(timeout=30000) as d:
            page.click("#download-pcapng")
        download = d.value
        path = os.path.join(OUT, "downloaded.pcapng")
        download.save_as(path)
        seen["download_pcapng"] = {"path": path, "name": download.suggested_filename}

        # The presets narrow the flows' window.
        n = flows_loaded(page)
        page.click(".presets button[data-after='15m ago']")
        wait_flows(page, n)
        seen["preset_15m"] = {"after": page.input_value("#after"), "info": page.text_content("#flows-info")}
        reset_packets(page)
        page.click("#run")
        wait_packets(page)
        shot(page, "web-search.png")

        # Time to the first packet line, from the click on Search (BENCHMARKS.md): warm, 9 runs.
        page.fill("#query", "host 10.0.1.37")
        page.fill("#after", "")
        page.fill("#before", "")
        times = []
        for _ in range(11):
            reset_packets(page)
            page.click("#run")
            wait_packets(page)
            times.append(float(page.evaluate("document.body.dataset.firstPacketMs")))
        seen["first_packet_ms"] = times
        browser.close()
    with open(os.path.join(OUT, "seen.json"), "w") as f:
        json.dump(seen, f, indent=1)


main()
