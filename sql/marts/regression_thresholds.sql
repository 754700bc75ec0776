-- The one-row relation of regression limits that sql/marts/regressions.sql reads, from bound
-- parameters (settings TRACEHOUSE_REGRESSION_MIN_HISTORY, _MIN_CHANGE, _Z_THRESHOLD).
SELECT
    $min_history::BIGINT AS min_history,
    $min_change::DOUBLE AS min_change,
    $z_threshold::DOUBLE AS z_threshold
