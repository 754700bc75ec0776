"""Headless Debian Chromium driven over the DevTools protocol, for tests of pages a person
looks at: console errors, every network request, screenshots and the DOM's text.

Chromium listens on 127.0.0.1 only, with its own empty profile and every background service
(updates, sync, QUIC, component downloads) switched off; nothing is installed at run time.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import struct
import subprocess
import time
import urllib.request
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def chromium_path() -> str | None:
    return shutil.which("chromium")


@dataclass
class PageVisit:
    url: str
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class Chromium:
    """One headless browser with one page; use as a context manager."""

    def __init__(self, profile: Path) -> None:
        executable = chromium_path()
        if executable is None:
            raise FileNotFoundError("chromium is not installed")
        profile.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                executable,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                "--window-size=1400,1000",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.socket: Any = None
        self.closing = contextlib.ExitStack()
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def __enter__(self) -> Chromium:
        from websockets.sync.client import connect

        port = self._devtools_port()
        deadline = time.monotonic() + 30
        page_socket = None
        while page_socket is None and time.monotonic() < deadline:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as reply:
                targets = json.load(reply)
            page_socket = next(
                (t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page"), None
            )
            if page_socket is None:
                time.sleep(0.1)
        assert page_socket is not None, "chromium opened no page"
        self.socket = self.closing.enter_context(
            connect(page_socket, max_size=None, open_timeout=30)
        )
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=1400,
            height=1000,
            deviceScaleFactor=1,
            mobile=False,
        )
        return self

    def resize(self, width: int, height: int = 1000) -> None:
        """The window as a person with a ``width``-pixel wide browser sees the page."""
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def __exit__(self, *_: object) -> None:
        self.closing.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def _devtools_port(self) -> int:
        assert self.process.stderr is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line and self.process.poll() is not None:
                break
            found = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if found:
                return int(found.group(1))
        raise RuntimeError("chromium did not start its DevTools endpoint")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        message_id = self.next_id
        self.socket.send(json.dumps({"id": message_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=60))
            if message.get("id") == message_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def evaluate(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def visit(self, url: str, ready: str = "true", timeout_s: float = 60) -> PageVisit:
        """Load ``url``, wait for ``ready`` (a JS expression) to be true, and report every
        request and every console error or uncaught exception seen meanwhile."""
        self.events.clear()
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.evaluate(f"document.readyState === 'complete' && ({ready})"):
                break
            time.sleep(0.2)
        else:
            raise TimeoutError(f"{url} was not ready within {timeout_s} s")
        self.evaluate("new Promise(r => setTimeout(r, 300))")  # late errors and requests
        visit = PageVisit(url)
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Network.requestWillBeSent":
                visit.requests.append(params["request"]["url"])
            elif method == "Runtime.exceptionThrown":
                visit.errors.append(json.dumps(params["exceptionDetails"])[:500])
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                visit.errors.append(json.dumps(params.get("args"))[:500])
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                visit.errors.append(params["entry"].get("text", "")[:500])
        return visit

    def screenshot(self, path: Path, *, scale: float = 1.0, full_page: bool = True) -> Path:
        """A PNG of the page (its whole height when ``full_page``), scaled by ``scale``."""
        import base64

        width, height = self.evaluate(
            "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]"
        )
        clip = {
            "x": 0,
            "y": 0,
            "width": width,
            "height": height if full_page else min(height, 1000),
            "scale": scale,
        }
        data = self.call(
            "Page.captureScreenshot", format="png", captureBeyondViewport=full_page, clip=clip
        )
        path.write_bytes(base64.b64decode(data["data"]))
        return path


def png_pixels(path: Path) -> tuple[int, int, list[tuple[int, ...]]]:
    """Width, height and the RGB(A) pixels of an 8-bit non-interlaced PNG (what Chromium writes)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    position, chunks, header = 8, [], b""
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            chunks.append(body)
        position += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, "unsupported PNG layout"
    channels = 4 if colour == 6 else 3
    raw = zlib.decompress(b"".join(chunks))
    stride = width * channels
    previous = bytearray(stride)
    pixels: list[tuple[int, ...]] = []
    offset = 0
    for _ in range(height):
        kind, line = raw[offset], bytearray(raw[offset + 1 : offset + 1 + stride])
        offset += 1 + stride
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                estimate = left + up - corner
                pa, pb, pc = abs(estimate - left), abs(estimate - up), abs(estimate - corner)
                nearest = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + nearest) & 0xFF
        pixels.extend(tuple(line[i : i + 3]) for i in range(0, stride, channels))
        previous = line
    return width, height, pixels
