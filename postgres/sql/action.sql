-- Reading actions. Each statement answers the action's columns, then its
-- current ticket's (columns.sql).

-- name: actionGetByIDSQL
-- actionGetByIDSQL reads one action with its current ticket.
SELECT {{actionColumns a}},
    {{ticketColumns}}
FROM actions a
{{currentTicket a}}
WHERE a.id = $1;

-- name: actionListSelect
-- actionListSelect is actionGetByIDSQL without its WHERE clause, which
-- actionListSQL builds.
SELECT {{actionColumns a}},
    {{ticketColumns}}
FROM actions a
{{currentTicket a}};

-- name: actionsByIDSQL
-- actionsByIDSQL reads the actions of a list of ids in one query.
SELECT {{actionColumns a}},
    {{ticketColumns}}
FROM actions a
{{currentTicket a}} WHERE a.id = ANY($1::uuid[]);

-- name: actionCountByStateSQL
SELECT state, count(*) FROM actions GROUP BY state;
