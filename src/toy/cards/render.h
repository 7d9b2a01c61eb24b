// cards/render.h — internal to the card module: the pseudocode sections of a card.
#pragma once

#include <string>

#include "toy/cards/card.h"

namespace toy::card {

// Shortest decimal text that reads back to the same float (f32) or double.
std::string short_float(double v, bool f32);

// The Markdown sections after the hyper-parameter block: notation, parameters, algorithms,
// written from the architecture's description with this card's numbers substituted.
std::string render_algorithms(const Card& c, const Description& d);

}  // namespace toy::card
