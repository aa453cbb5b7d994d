"""The output layer before this change (2278351): the transposed copy for the hidden gradient,
the bias added after the matmul."""
import jax
def patch(ol):
  @jax.custom_vjp
  def every_score(hidden, embedding):
    return hidden @ embedding.T
  def fwd(hidden, embedding):
    return hidden @ embedding.T, (hidden, embedding)
  def bwd(res, grad):
    hidden, embedding = res
    columns = jax.lax.optimization_barrier(embedding.T)
    return grad @ columns.T, grad.T @ hidden
  every_score.defvjp(fwd, bwd)
  def call(self, hidden):
    return ol._float32(every_score(hidden, self.embedding) + self.bias)
  ol.OutputLayer.__call__ = call
