-- A runtime's OpenHands agent-server, as a host registered it (POST
-- /v1/runtimes agent_server_url): the engine reads its idle clock while the
-- runtime runs. A registered runtime is decided already (registered_at), so
-- the generated decided column needs no change.

ALTER TABLE runtimes ADD COLUMN agent_server_url text NOT NULL DEFAULT '';
