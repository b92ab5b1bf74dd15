-- The pieces of actionTransitionSQL, the one builder of a transition (its
-- variants: testdata/action_transition.golden).

-- name: movedColumns
-- movedColumns are a transition's answer's: the updated row u.
{{actionColumns u}};

-- name: ticketColumns
-- ticketColumns follow the action's in every answer.
{{ticketColumns}};
