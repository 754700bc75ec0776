-- web_traces once per hardware scope they belong to (a line without an evaluation has no
-- device, so it belongs to scope `all` only).
SELECT h.hardware, t.*
FROM web_hardware_scopes AS h
JOIN web_traces AS t ON t.source = h.source AND (h.hardware = 'all' OR t.device = h.hardware)
