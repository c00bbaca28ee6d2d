-- A consent token issued for a flow is a use on its ledger that names the
-- resource the token opens (its audience). On Citus flow_uses is
-- distributed by now, so the change runs on its own, in the DO block.
do $$
begin
    execute 'alter table flow_uses add column resource text';
end
$$;
