-- Delivery isolation: a delivery's row is updated at each attempt
-- (its state, last error and finish time). With none of those columns in an
-- index and room left on its page, PostgreSQL updates the row in place (a
-- HOT update) instead of adding an entry to each of the table's six indexes:
-- most of what the update costs when a backlog drains. Deliveries are sent
-- in the order they were stored, so a page's rows are updated at about the
-- same time, before the versions they replace can be pruned: the page keeps
-- room for most of them, at the price of a larger table.
-- Retention found finished deliveries by their finish time; it now narrows
-- them by creation time (a delivery finishes after it is created) through a
-- BRIN index, which no update touches.
drop index webhook_events_finished;
create index webhook_events_created on webhook_events using brin (created_at);
alter table webhook_events set (fillfactor = 60);
