// The model's buffers (BatchNorm running statistics) across ranks.
//
// With per-rank BatchNorm statistics (PyTorch DDP's default) every rank's
// running statistics drift apart; average_running_statistics() replaces
// each floating buffer by its mean over ranks (num_batches_tracked is the
// same on every rank and is averaged too, which leaves it unchanged), so
// evaluation and checkpoints do not depend on which rank's buffers are used.
// Collective: every rank must call these in the same order.
#pragma once

#include "distributed/communicator.h"
#include "nn/model.h"

namespace lockstep::app {

// Rank root's buffers onto every rank (at start-up, beside the weights).
void broadcast_buffers(distributed::Communicator& comm, const nn::Model& model, int root);

// Every buffer := its mean over the ranks (nothing with one rank).
void average_running_statistics(distributed::Communicator& comm, const nn::Model& model);

}  // namespace lockstep::app
