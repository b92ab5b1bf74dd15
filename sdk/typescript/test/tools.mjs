// The tools file of the SDK tests.
export const tools = `
tools:
  issue_refund:
    class: exactly-once
    description: Refund one order line.
    intent: "refund:{order_id}:{line_id}"
    claim_timeout: 2m
  send_customer_email:
    class: at-most-once
    description: Send one email to a customer.
    intent: "email:{customer_id}:{topic}"
    preview: { title: "{subject}" }
  invalidate_cache:
    annotations: { idempotentHint: true }
`;
