-- Placeholder, on the expiry branch only: the lead's 013_consent_receipts.sql
-- (consent receipts) replaces it at merge. tern wants migration numbers without
-- gaps, and the expiry branch's own migration is 014.
select 1;
