#!/usr/bin/env python3
"""Synthetic multi-turn conversations for training and evaluating warmstart's chat model.

The model's skills (what `warmstart chat` claims it can do):
* recall: the user states facts (name, number, city, favourite colour, pet's name, a short
  list), one to four of them, alone or several in one message; one to eight turns later
  the user asks about one; the reply repeats the fact in a fixed form ("Your name is X.").
* arithmetic: single-digit addition and subtraction ("The answer is 7.").
* greetings and thanks get a short fixed reply ("Hello! How can I help you?",
  "You're welcome!").
* unknown: a question about a fact never stated, or about the world, gets "I don't know."
Unrelated turns (small talk, repeating words, sums) fill the conversation around them.

Everything the user says is built from pools split in two. The "train" parts build the
training conversations; the "heldout" parts, which the training data never contains,
build the evaluation conversations: other sentence frames for stating and asking, other
openers and closers around them, other names (several that the tokenizer splits into
many pieces), cities, pet names, list items, numbers, greetings and world questions.
Training names, cities and pets are also made up from syllables, so that the model
learns to copy what it was told rather than to memorise a list.

Usage (build_model.sh runs these):
  gen_data.py --split train --augment --grammar --positions --restate --wide-items [--distractors]
              --count 70000 --seed 1 --out train.jsonl
  gen_data.py --split heldout [--heldout-pools POOLS.json] --per-length 60 --seed 7 --out heldout.jsonl
Each line: {"messages": [...], "turns": L, "checks": [{"turn": i, "kind": k, "expect": [s, ...]}]}
where `turn` indexes the user message whose reply must contain every string of `expect`,
and `kind` is the skill (recall, arithmetic, greeting, unknown).
Held-out files hold --per-length conversations of each length in HELDOUT_LENGTHS turns.
"""
import argparse
import functools
import json
import math
import pathlib
import random
import re
import string
import sys

import more_pools
from more_pools import (ASK_GRAMMAR, FACT_EXTRA, FACT_TRAILING, LIST_TRAILERS, PLACE_SUFFIXES, STATE_NP,
                        STATE_PATTERNS, STATE_VALUE_FIRST, STATE_VERBS, TRAILERS, VARIETY_CLOSERS, VARIETY_OPENERS,
                        VARIETY_TRAILERS, WIDE_CHATTER, WIDE_NP_LEADS, WIDE_WH_LEADS, WIDE_WORLD,
                        frames_from_parts, variety_frames)

HELDOUT_LENGTHS = (2, 8, 20)

# ---------------------------------------------------------------- values


def words(s):
    return s.split()


TRAIN_NAMES = words("""Anna Ben Clara David Emma Felix Grace Henry Iris Jack Kara Leo Maya Nina Oscar
Paula Quinn Rosa Sam Tara Uma Victor Wendy Xavier Yara Zoe Adam Bella Carl Diana Eric Fiona George
Hannah Ivan Julia Kevin Laura Mark Nora Owen Peter Ruth Simon Tina Walter Alice Bruno Chloe Daniel
Elena Frank Gina Hugo Irene Jonas Kim Lucas Mia Noah Olga Pablo Rita Sofia Tom Vera William Amir
Bianca Chen Dmitri Esther Farid Greta Hiro Ines Jamal Keiko Lars Marta Nadia Omar Priya Raj Sara
Theo Ulla Vik Yusuf Zara Lena Max Ella Finn Ava Liam Otto Ida Emil Alma Axel Lily Ruby Jake Leah
Cody Gabe Holly Mateo Camila Aiden Sienna Rohan Ananya Kenji Sakura Lorenzo Giulia Pierre Amelie""")
HELDOUT_NAMES = words("""Dana Orla Siobhan Xiomara Zbigniew Nkechi Aoife Thandiwe Eero Ngozi Kwame
Yevgenia Tadhg Oisin Ifeoma Rhiannon Guadalupe Wojciech Anneliese Kazuki Svetlana Pradeep Tomasz
Leilani Esperanza Aurelio Mehmet Zeynep Chidi Obadiah Persephone Quentin Ximena Yolanda Ezekiel
Florentina Gwendolyn Hamish Ignatius Jolene Kerensa Bartholomew Magdalena Sebastiano Hyacinth""")

TRAIN_CITIES = words("""Paris London Berlin Madrid Rome Vienna Prague Oslo Dublin Athens Warsaw
Tokyo Seoul Beijing Delhi Cairo Lagos Nairobi Sydney Toronto Chicago Boston Denver Austin Seattle
Miami Lima Bogota Quito Santiago Havana Moscow Kyiv Helsinki Stockholm Zurich Geneva Munich Hamburg
Milan Naples Seville Valencia Lyon Nice Brussels Amsterdam Copenhagen Riga Vilnius Tallinn Budapest
Bucharest Istanbul Dubai Mumbai Bangkok Hanoi Manila Jakarta Osaka Kyoto Perth Auckland Montreal
Vancouver Dallas Phoenix Houston Glasgow Leeds Utrecht Antwerp Florence Turin Bilbao Marseille""")
HELDOUT_CITIES = words("""Lisbon Porto Reykjavik Marrakesh Ljubljana Tbilisi Yerevan Wellington
Montevideo Ouagadougou Kathmandu Thessaloniki Bratislava Antananarivo Cartagena Guadalajara Winnipeg
Adelaide Krakow Gdansk Trondheim Dubrovnik Valparaiso Mombasa Zanzibar Edinburgh Bordeaux Salzburg
Bergen Aarhus Tampere Heidelberg""")

TRAIN_PETS = words("""Rex Milo Luna Coco Rocky Daisy Teddy Nala Simba Oreo Pepper Biscuit Ziggy
Shadow Ginger Loki Tiger Buddy Peanut Pixel Waffles Noodle Pickles Muffin Cookie Sparky Fluffy Bandit
Marley Olive Juno Kiwi Tofu Bean Snowy Patch Button Pumpkin Whiskers Bubbles""")
HELDOUT_PETS = words("""Biscotti Pumpernickel Zorro Mittens Gizmo Nugget Sprinkles Widget Socks
Chewbacca Fudge Pretzel Marmalade Dumpling Truffle Noodlebug""")

COLOURS = words("red blue green yellow orange purple pink brown black white grey silver gold teal "
                "violet indigo maroon navy beige turquoise")

TRAIN_ITEMS = words("""apples milk eggs bread butter rice tea coffee sugar salt onions carrots
lemons cheese pasta beans flour honey oats yogurt soap paper pens books socks shoes hats cups plates
spoons forks candles batteries lamps keys maps tickets stamps envelopes tomatoes potatoes grapes
pears jam juice nails glue tape towels""")
HELDOUT_ITEMS = words("""avocados shampoo lightbulbs cinnamon sardines toothpaste mangoes notebooks
peppers vinegar matches blueberries crackers umbrellas""")

# Numbers the training data never uses (a fixed draw, independent of --seed).
_number_rng = random.Random(20261203)
HELDOUT_NUMBERS = sorted({_number_rng.randint(10, 99) for _ in range(20)}
                         | {_number_rng.randint(100, 999) for _ in range(60)}
                         | {_number_rng.randint(1000, 9999) for _ in range(70)})

SYLLABLE_ONSETS = words("b br c ch d dr f g gr h j k kl l m n p pr r s sh st t tr v w z")
SYLLABLE_VOWELS = words("a e i o u a e i o ai ei ou ia")
SYLLABLE_CODAS = ["", "", "", "n", "r", "l", "s", "m", "x", "nd"]
HELDOUT_WORDS = {w.lower() for w in HELDOUT_NAMES + HELDOUT_CITIES + HELDOUT_PETS}


# What --augment turns on (all 0 otherwise, so the held-out draws are unchanged):
# random_letters: share of made-up words spelled from random letters rather than syllables
#   (their tokens are any pieces the tokenizer has, as in names it splits oddly);
# made_up_items: share of list items that are made-up words;
# echo_made_up: share of words to repeat that are made up (copying practice on any token);
# echo_extra: share of the other unrelated turns turned into repeat-after-me turns.
# distractors (--distractors): share of messages with unknown words inserted, so that the
#   model keys on the words that name a fact and ignores words it never saw.
# wide (--wide): share of world questions and chatter built from the WIDE_ pools below.
# compound_items, made_up_places (--grammar): share of list items with a word in front, of
#   world questions about a made-up place.
# trailers (--positions): share of stated values followed by other words.
# restate (--restate): 1 when the reply to a stated fact repeats it.
# vocab_pieces (--vocab-pieces): share of made-up words glued from 2-3 random letter-only
#   tokens of the tokenizer, so that every piece a held-out word may split into (" blue" "b"
#   "er" "ries") is a copy target about as often as any other; tokens seldom in replies are
#   the ones the model garbles when copying.
# value_shapes (--value-shapes): share of names, cities, pets and list items of several words
#   or with an accented letter.
# unknown_after_value (--value-shapes): share of --positions' trailers after a name, city or pet
#   that are one unknown word ("I'm from Aveiro originally" is not the city "Aveiro originally").
# late_greetings (--value-shapes): share of unrelated turns that are a greeting (otherwise only
#   a first turn is; "Hello!" in mid-conversation got "You're welcome!").
AUG = {"random_letters": 0.0, "made_up_items": 0.0, "echo_made_up": 0.0, "echo_extra": 0.0, "distractors": 0.0,
       "wide": 0.0, "compound_items": 0.0, "made_up_places": 0.0, "trailers": 0.0, "restate": 0.0,
       "vocab_pieces": 0.0, "value_shapes": 0.0, "unknown_after_value": 0.0, "late_greetings": 0.0}
VOCAB_PIECES = []  # letter-only token strings of --vocab-pieces' tokenizer, leading space removed
LETTERS = "aaabcdeeeefghiiijklmnooopqrstuuvwxyz"


def made_up_word(rng):
    while True:
        if AUG["vocab_pieces"] and rng.random() < AUG["vocab_pieces"]:
            w = "".join(rng.choice(VOCAB_PIECES) for _ in range(rng.randint(2, 3)))
        elif AUG["random_letters"] and rng.random() < AUG["random_letters"]:
            w = "".join(rng.choice(LETTERS) for _ in range(rng.randint(3, 10)))
        else:
            w = "".join(rng.choice(SYLLABLE_ONSETS) + rng.choice(SYLLABLE_VOWELS) + rng.choice(SYLLABLE_CODAS)
                        for _ in range(rng.randint(2, 3)))
        if w not in HELDOUT_WORDS:
            return w.capitalize()


def draw_number(rng, split):
    if split == "heldout":
        return str(rng.choice(HELDOUT_NUMBERS))
    held = set(HELDOUT_NUMBERS)
    while True:
        n = rng.choice([rng.randint(0, 9), rng.randint(10, 99), rng.randint(100, 999), rng.randint(1000, 9999)])
        if n not in held:
            return str(n)


def draw_from(train_pool, heldout_pool, made_up=0.0, suffixes=(), shape=None, key=None):
    """shape(rng, w): a value of several words or with accented letters (--value-shapes), unless
    it is one of the held-out values of `key` (heldout_values())."""
    def draw(rng, split):
        if split == "heldout":
            return rng.choice(heldout_pool)
        if rng.random() < made_up:
            w = made_up_word(rng)
            w = w + rng.choice(suffixes) if suffixes and rng.random() < 0.5 else w
        else:
            w = rng.choice(train_pool)
        if shape and AUG["value_shapes"] and rng.random() < AUG["value_shapes"]:
            shaped_w = shape(rng, w)
            w = w if shaped_w.lower() in heldout_values(key) else shaped_w
        return w
    return draw


# --value-shapes: values as people type them, not one plain word: "Mary Ann Okafor", "Anna-Lena",
# "New Brovania", "Mr Whiskers", letters with accents ("José", "Malmö"). A value the model has
# only seen as one ASCII word gets cut at its first space or first accented byte ("Your name
# is Jos.", "You live in New.").
ACCENTS = {"a": "áàâäãåăą", "e": "éèêëęěẽễ", "i": "íìîïı", "o": "óòôöõøő", "u": "úùûüůű", "n": "ñń",
           "c": "çč", "s": "šśș", "z": "žźż", "l": "ł", "y": "ý", "g": "ğ", "r": "ř", "d": "đď", "t": "ţťþ"}
NAME_PARTICLES = words("van de da del von bin al- O' Mc Mac di le la dos ben du y i") + [
    "van den", "van der", "de la", "de los", "von der"]
CITY_BEFORE = words("New San Santa Saint St. Port Fort Lake North South East West El Los Las Mount Cape Old "
                    "Upper Lower Little Great Bad Porto Villa Ciudad Rio Puerto Sankt Nova")
CITY_AFTER = words("City Springs Falls Beach Heights Bay Harbour Valley Park Hills Creek Island Junction Bridge "
                   "Town Point Rapids Crossing Sound")
CITY_LINKS = words("de del do da upon on-Sea am an der la sur") + ["de las", "de los", "de la", "an der"]
PET_TITLES = words("Mr Mr. Mrs Miss Ms Sir Lady Lord Captain Doctor Dr. Professor Princess Prince King Queen "
                   "Little Big Baby Major General Admiral Count Duke Duchess Auntie Uncle Señor Madame")


def accented(rng, w):
    """w with one letter swapped for an accented one, keeping its case; a capital that takes an
    accent gets it a third of the time ("Élodie", "Ålesund": the first piece is where copies fail)."""
    spots = [i for i, c in enumerate(w) if c.lower() in ACCENTS]
    if not spots:
        return w
    i = 0 if spots[0] == 0 and w[0].isupper() and rng.random() < 0.33 else rng.choice(spots)
    a = rng.choice(ACCENTS[w[i].lower()])
    return w[:i] + (a.upper() if w[i].isupper() else a) + w[i + 1:]


def another(rng, pool):
    return rng.choice(pool) if rng.random() < 0.5 else made_up_word(rng)


def shaped(forms):
    """A value-shaping function: an accented letter 40% of the time, then the first of `forms`
    (cumulative share, function of rng and the value) whose share the draw is under; one word
    otherwise."""
    def shape(rng, w):
        w = accented(rng, w) if rng.random() < 0.4 else w
        r = rng.random()
        return next((form(rng, w) for upto, form in forms if r < upto), w)
    return shape


def with_particle(rng, w):
    p = rng.choice(NAME_PARTICLES)  # "van Dijk", "al-Amin", "O'Neill", "McLeod"
    glued = p[-1] in "-'" or p in ("Mc", "Mac")
    return f"{w} {p}{'' if glued else ' '}{another(rng, TRAIN_NAMES)}"


def with_link(rng, w):
    link = rng.choice(CITY_LINKS)  # "Rio de Lima", "Brovania-on-Sea", "Frankfurt am Main"
    return f"{w}-{link}" if link == "on-Sea" else f"{w} {link} {another(rng, TRAIN_CITIES)}"


shape_name = shaped([(0.35, lambda rng, w: f"{w} {another(rng, TRAIN_NAMES)}"),  # first and last name
                     (0.45, lambda rng, w: f"{w}-{another(rng, TRAIN_NAMES)}"),  # Anna-Lena
                     (0.55, lambda rng, w: f"{w}-{another(rng, TRAIN_NAMES)} {another(rng, TRAIN_NAMES)}"),
                     (0.67, lambda rng, w: f"{w} {another(rng, TRAIN_NAMES)} {another(rng, TRAIN_NAMES)}"),
                     (0.8, with_particle)])
shape_city = shaped([(0.35, lambda rng, w: f"{rng.choice(CITY_BEFORE)} {w}"),
                     (0.55, lambda rng, w: f"{w} {rng.choice(CITY_AFTER)}"),
                     (0.7, lambda rng, w: f"{w} {another(rng, TRAIN_CITIES)}"),
                     (0.8, with_link)])
shape_pet = shaped([(0.45, lambda rng, w: f"{rng.choice(PET_TITLES)} {w}"),
                    (0.7, lambda rng, w: f"{w} {another(rng, TRAIN_PETS + TRAIN_NAMES)}"),
                    (0.8, lambda rng, w: f"{rng.choice(PET_TITLES)} {w} {another(rng, TRAIN_PETS)}")])


# List items as shopping lists hold them: a word in front ("frozen peas"), two words ("rice
# flour"), three ("whole wheat pasta"), so that an item does not end where a known item word
# does ("baking soda" was cut to "baking"). No made-up endings: a model that has seen values go
# on past an unknown lower-case word reads "I'm from Aveiro originally" as the city "Aveiro
# originally" (tools/train/README.md, session 34).
ITEM_FRONTS = words("""frozen fresh dried smoked ground sliced grated whole brown white green red black sweet
sour baking dish hand kitchen garden olive coconut almond peanut sesame sunflower maple chicken beef pork
vegetable tomato garlic onion lemon lime orange apple cherry strawberry vanilla chocolate cottage goat rice soy
oat corn wheat rye sourdough paper plastic cotton laundry toilet bath face dog cat bird baby spare instant
canned tinned skimmed sparkling iced spicy mild salted unsalted organic wholemeal cream""")
ITEM_ENDS = words("""sauce paste soap flour oil powder juice bread milk syrup bags wipes noodles chips crackers
beans seeds nuts flakes cubes stock cheese butter cream yogurt tea biscuits bars rolls buns wraps mix spray
cleaner gel tablets pods liquid filters bulbs brushes towels sheets lids foil film pegs treats food litter
fillets thighs wings mince steaks leaves sticks sprouts greens soda vinegar water rings slices""")


def shape_item(rng, w):
    w = accented(rng, w) if rng.random() < 1 / 3 else w
    r = rng.random()
    if r < 0.3:
        return f"{rng.choice(ITEM_FRONTS)} {w}"
    if r < 0.6:
        return f"{rng.choice(ITEM_FRONTS)} {rng.choice(ITEM_ENDS)}"
    if r < 0.7:
        return f"{rng.choice(ITEM_FRONTS)} {rng.choice(ITEM_FRONTS)} {rng.choice(ITEM_ENDS + TRAIN_ITEMS)}"
    return w


@functools.cache
def heldout_values(key):
    """Lower-cased held-out values of `key` ("names", "cities", "pets", "items") of every held-out
    set: built-in, pool files, value files. A shaped training value is never one of them."""
    built_in = {"names": HELDOUT_NAMES, "cities": HELDOUT_CITIES, "pets": HELDOUT_PETS, "items": HELDOUT_ITEMS}
    files = pathlib.Path(__file__).resolve().parents[2].glob("tests/data/chat_heldout*_values.json")
    return ({w.lower() for w in built_in[key]} | heldout_strings(key)
            | {w.lower() for f in files for w in json.loads(f.read_text())[key]})


def draw_list(rng, split):
    items = drawn = rng.sample(TRAIN_ITEMS if split == "train" else HELDOUT_ITEMS, rng.randint(2, 4))
    if AUG["made_up_items"]:
        items = [made_up_word(rng).lower() if rng.random() < AUG["made_up_items"] else w for w in items]
    if AUG["compound_items"]:
        items = [compound_item(rng) if rng.random() < AUG["compound_items"] else w for w in items]
    if AUG["value_shapes"]:
        items = [shape_item(rng, w) if rng.random() < AUG["value_shapes"] else w for w in items]
        items = [d if w.lower() in heldout_values("items") else w for d, w in zip(drawn, items)]  # "peanut butter"
    if rng.random() < 0.5:
        return ", ".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


# ---------------------------------------------------------------- facts
# state: sentence frames that state the fact ({x} = value); np: noun phrases naming it;
# wh: clauses naming it ("where I live"); ask: whole questions. Each split in train/heldout.

FACTS = {
    "name": dict(
        draw=draw_from(TRAIN_NAMES, HELDOUT_NAMES, made_up=0.5, shape=shape_name, key="names"),
        state=dict(train=["My name is {x}", "I'm {x}", "Call me {x}", "You can call me {x}", "The name's {x}",
                          "My name's {x}", "{x} here", "This is {x}", "I am called {x}", "Everyone calls me {x}",
                          "People call me {x}", "My first name is {x}", "Name: {x}", "They call me {x}",
                          "My friends call me {x}", "I go by the name {x}", "My name is {x}, by the way"],
                   heldout=["I'm named {x}", "You may call me {x}", "My parents named me {x}",
                            "Let me introduce myself, my name is {x}", "The name is {x}"]),
        np=dict(train=["my name", "my first name", "the name I told you", "the name I gave you", "my name again"],
                heldout=["the name I mentioned", "the name I shared with you"]),
        wh=dict(train=["what my name is", "what I am called", "what my name was", "who I am"],
                heldout=["what name I gave", "what you should call me"]),
        ask=dict(train=["Who am I?", "What am I called?", "What do people call me?", "What should you call me?",
                        "My name is what?"],
                 heldout=["What name do I have?", "Who is talking to you?"]),
        answer="Your name is {x}.",
    ),
    "number": dict(
        draw=draw_number,
        state=dict(train=["My favourite number is {x}", "My lucky number is {x}", "Remember the number {x}",
                          "The number is {x}", "My number is {x}", "Keep the number {x} in mind",
                          "Note this number: {x}", "Here is a number: {x}", "My favorite number is {x}",
                          "Please remember the number {x}", "I like the number {x}", "My number? It is {x}",
                          "Store this number: {x}", "The number to remember is {x}"],
                   heldout=["I picked the number {x}", "A number for later: {x}", "My secret number is {x}",
                            "Please hold on to the number {x} for me"]),
        np=dict(train=["my number", "my favourite number", "my lucky number", "the number", "the number I told you",
                       "the number I gave you", "my favorite number"],
                heldout=["the number I mentioned", "the number I shared with you"]),
        wh=dict(train=["what my number is", "which number I gave you", "what the number was"],
                heldout=["which number I picked", "what number I chose"]),
        ask=dict(train=["Which number did I give you?", "What number did I say?", "What was the number?"],
                 heldout=["Which number was mine?", "What number do I like?"]),
        answer="Your number is {x}.",
    ),
    "city": dict(
        draw=draw_from(TRAIN_CITIES, HELDOUT_CITIES, made_up=0.4, suffixes=["ton", "burg", " City", "ville"],
                       shape=shape_city, key="cities"),
        state=dict(train=["I live in {x}", "I'm from {x}", "I come from {x}", "My home is in {x}", "My city is {x}",
                          "I live in the city of {x}", "Home for me is {x}", "These days I live in {x}",
                          "My home city is {x}", "I am from {x}", "I grew up in {x} and still live there",
                          "My town is {x}", "I moved to {x} and live there now"],
                   heldout=["My home town is {x}", "I have lived in {x} for years", "My flat is in {x}",
                            "I am based in {x}", "I reside in {x}"]),
        np=dict(train=["my city", "my home city", "the city I live in", "my town", "the city I told you",
                       "the city I come from"],
                heldout=["the city I mentioned", "the place I live"]),
        wh=dict(train=["where I live", "where I am from", "where my home is", "which city I live in"],
                heldout=["what city I live in", "where I said I live"]),
        ask=dict(train=["Where do I live?", "Where am I from?", "Which city do I live in?", "Where is my home?",
                        "What city am I from?"],
                 heldout=["In which city do I live?", "Where is it that I live?"]),
        answer="You live in {x}.",
    ),
    "colour": dict(
        draw=lambda rng, split: rng.choice(COLOURS),
        state=dict(train=["My favourite colour is {x}", "My favorite color is {x}", "I love the colour {x}",
                          "{x} is my favourite colour", "The colour I like most is {x}", "I like the color {x} best",
                          "My colour is {x}", "My favourite color is {x}", "I really love the colour {x}",
                          "The best colour is {x}, I think"],
                   heldout=["My best-loved colour is {x}", "I would always choose the colour {x}",
                            "Colour-wise, I prefer {x}", "Of all colours, I like {x} most"]),
        np=dict(train=["my favourite colour", "my favorite color", "my colour", "the colour I like",
                       "the colour I told you", "my favourite color"],
                heldout=["the colour I mentioned", "the color I prefer"]),
        wh=dict(train=["what my favourite colour is", "which colour I like", "which color I love"],
                heldout=["what colour I prefer", "which colour I chose"]),
        ask=dict(train=["Which colour do I like?", "What colour do I love?", "Which color is my favourite?"],
                 heldout=["What colour do I prefer?", "Which colour is the one I like?"]),
        answer="Your favourite colour is {x}.",
    ),
    "pet": dict(
        draw=draw_from(TRAIN_PETS, HELDOUT_PETS, made_up=0.5, shape=shape_pet, key="pets"),
        state=dict(train=["My dog is called {x}", "My cat's name is {x}", "I have a pet named {x}",
                          "My pet is called {x}", "Our dog is named {x}", "My pet's name is {x}",
                          "I have a rabbit called {x}", "My hamster is called {x}", "We call our pet {x}",
                          "I named my pet {x}", "My cat is called {x}", "My puppy is named {x}"],
                   heldout=["My parrot is named {x}", "I own a little pet called {x}", "The name of our pet is {x}",
                            "We have a cat, her name is {x}"]),
        np=dict(train=["my pet's name", "the name of my pet", "my pet", "my dog's name", "my cat's name",
                       "the name of my dog"],
                heldout=["the name my pet has", "my pet's name again"]),
        wh=dict(train=["what my pet is called", "what my pet's name is", "what I named my pet"],
                heldout=["how my pet is called", "what name my pet has"]),
        ask=dict(train=["What is my pet called?", "What did I name my pet?", "What is my dog called?",
                        "What do we call our pet?"],
                 heldout=["How is my pet called?", "What name does my pet have?"]),
        answer="Your pet is called {x}.",
    ),
    "list": dict(
        draw=draw_list,
        state=dict(train=["My shopping list is {x}", "I need to buy {x}", "Remember my list: {x}",
                          "Here is my list: {x}", "Please remember these items: {x}", "I have to get {x}",
                          "Shopping list: {x}", "Keep this list: {x}", "The things I need are {x}",
                          "On my list are {x}", "Add {x} to my list", "My list is {x}"],
                   heldout=["Things to pick up later: {x}", "Today I must buy {x}", "Put {x} on my shopping list",
                            "The items on my list are {x}"]),
        np=dict(train=["my list", "my shopping list", "the list", "the items on my list", "the things I need",
                       "the list I gave you"],
                heldout=["the list I mentioned", "the items I must buy"]),
        wh=dict(train=["what is on my list", "what I need to buy", "what I have to get"],
                heldout=["what my list says", "which items I need"]),
        ask=dict(train=["What do I need to buy?", "What is on my list?", "What do I have to get?"],
                 heldout=["Which items are on my list?", "What must I buy?"]),
        answer="Your list is {x}.",
    ),
}

NP_LEADS = dict(train=["What is {o}?", "What's {o}?", "What was {o}?", "Do you remember {o}?", "Can you tell me {o}?",
                       "Do you know {o}?", "Tell me {o}.", "Remind me of {o}.", "Please tell me {o}.",
                       "What is {o} again?", "I forgot {o}. What was it?", "Repeat {o}, please."],
                heldout=["Could you recall {o}?", "Would you remind me of {o}?", "Quick check: {o}?",
                         "Please say {o} once more.", "I need {o}, what is it?"])
WH_LEADS = dict(train=["Do you remember {o}?", "Can you tell me {o}?", "Do you know {o}?", "Tell me {o}.",
                       "Remind me {o}.", "Do you still know {o}?"],
                heldout=["Could you recall {o}?", "Any idea {o}?", "Would you tell me {o}?"])

OPENERS = dict(train=["Hi, ", "Hello! ", "Hey, ", "Ok, ", "So, ", "By the way, ", "Also, ", "Well, ", "Oh, and ",
                      "Listen, ", "Right, ", "Now, ", "Okay. ", "Hello there. "],
               heldout=["Alright then. ", "One more thing: ", "Hmm, ", "Good morning! ", "Before I forget, "])
CLOSERS = dict(train=[" Thanks!", " Please.", " Thank you.", " :)", " Please remember that.", " Don't forget it.",
                      " Okay?", " Thanks a lot."],
               heldout=[" Cheers.", " Much appreciated.", " Keep that in mind!"])

# ---------------------------------------------------------------- other turns

GREETINGS = dict(train=["Hi!", "Hello!", "Hey!", "Hi there!", "Hello there.", "Good morning!", "Good evening.",
                        "Hey, hello!", "Morning!", "Hi.", "Hello", "hi", "Hey there!", "Good morning."],
                 heldout=["Hello again!", "Hi, good morning!", "Hey there, hello.", "Well hello!", "Good day!"])
THANKS = dict(train=["Thanks!", "Thank you!", "Thanks a lot.", "Thank you very much.", "Great, thanks!",
                     "Cheers!", "Thanks for that.", "thanks", "Ok, thank you."],
              heldout=["Many thanks!", "Thank you so much!", "Thanks, that helps.", "Okay, thanks a lot!"])
GREETING_REPLY, THANKS_REPLY = "Hello! How can I help you?", "You're welcome!"
HELLO_OPENERS = dict(train=["Hi, ", "Hello! ", "Hey! "], heldout=["Hi there, ", "Good day! "])  # before a first-turn fact

SMALL_TALK = [("How are you?", "I am fine, thank you."), ("Who are you?", "I am a small assistant made by warmstart."),
              ("What can you do?", "I can remember what you tell me and do small sums."),
              ("Bye!", "Goodbye!"), ("Are you a robot?", "I am a small language model."),
              ("Can you help me?", "Yes, of course.")]

ARITH = dict(train=["What is {a} plus {b}?", "What is {a} + {b}?", "{a} + {b} = ?", "{a}+{b}?", "Add {a} and {b}.",
                    "How much is {a} plus {b}?", "Calculate {a} + {b}.", "What do you get if you add {a} and {b}?",
                    "What's {a} plus {b}?", "{a} plus {b}?", "Compute {a} + {b}."],
             heldout=["Can you work out {a} plus {b}?", "Quick sum: {a} + {b}", "Please calculate {a} plus {b}.",
                      "I need {a} + {b}, what is it?"])
ARITH_SUB = dict(train=["What is {a} minus {b}?", "What is {a} - {b}?", "{a} - {b} = ?", "{a}-{b}?",
                        "Subtract {b} from {a}.", "How much is {a} minus {b}?", "Calculate {a} - {b}.",
                        "What's {a} minus {b}?", "{a} minus {b}?", "What is {a} take away {b}?"],
                 heldout=["Can you work out {a} minus {b}?", "Quick sum: {a} - {b}", "Please calculate {a} minus {b}.",
                          "I need {a} - {b}, what is it?"])

COUNTRIES = dict(train=words("France Peru Japan Chile Kenya Norway Canada Egypt Spain Brazil India Ghana"),
                 heldout=words("Mongolia Bolivia Finland Vietnam"))
WORLD = dict(train=["What is the capital of {c}?", "Who is the president of {c}?", "How many people live in {c}?",
                    "What is the weather today?", "What time is it?", "Who wrote the first novel?",
                    "How far away is the moon?", "What year is it?", "What is the tallest mountain in {c}?",
                    "Who won the game last night?", "What is the meaning of life?", "How old is the universe?",
                    "What is the best film ever made?", "What language do they speak in {c}?"],
             heldout=["Who painted the most famous painting in {c}?", "What is the population of {c}?",
                      "How deep is the ocean?", "Which river is the longest in {c}?", "What will the weather be tomorrow?"])
UNKNOWN_REPLY = "I don't know."

ECHO_WORDS = words("""sun moon star tree river stone cloud rain snow wind fire light dark quick slow
happy small big cold warm old new bright soft loud calm wild bird fish frog bear fox owl wolf lion mouse
door book pen cup box road hill lake sea boat car bus train ship house garden""")
ECHO = dict(train=["Repeat after me: {w}", "Say this back: {w}", "Echo: {w}", "Please repeat: {w}",
                   "Copy this exactly: {w}"],
            heldout=["Say back these words: {w}", "Could you repeat this: {w}"])
CHATTER_SUBJECTS = words("brother sister friend neighbour boss teacher cousin uncle aunt colleague")
CHATTER_DID = ["was late", "went home early", "called me", "bought a new car", "is on holiday", "plays football",
               "cooked dinner", "fixed the door", "read a long book", "lost the keys", "started a new job"]
CHATTER_WHEN = ["today", "yesterday", "this morning", "last night", "on Sunday", "again", "this week"]
CHATTER_PLAIN = ["The weather is cold today.", "It is raining here.", "I had a long day.", "The bus was late.",
                 "I am a bit tired.", "The coffee is good today.", "Work was busy.", "I watched a film yesterday."]


# Wider pools of real values (--augment --wide; every word in a held-out pool is filtered
# out), used where they are facts about the user AND where they are not (world questions,
# third-person chatter answered "I see."), so that the frame, not the kind of value, marks a
# fact to remember. Neither way has beaten the committed model yet: see tools/train/README.
def _not_heldout(pool):
    held = HELDOUT_WORDS | {w.lower() for w in HELDOUT_ITEMS + COUNTRIES["heldout"]}
    return [w for w in pool if w.lower() not in held]


WIDE_NAMES = _not_heldout(more_pools.WIDE_NAMES)
WIDE_CITIES = _not_heldout(more_pools.WIDE_CITIES)
WIDE_PETS = _not_heldout(more_pools.WIDE_PETS)
WIDE_ITEMS = _not_heldout(more_pools.WIDE_ITEMS)
COUNTRIES_WIDE = _not_heldout(more_pools.COUNTRIES_WIDE)


def wide_chatter(rng):
    t = rng.choice(WIDE_CHATTER)
    return t.format(n=rng.choice(WIDE_NAMES), p=rng.choice(WIDE_CITIES), a=rng.choice(WIDE_PETS),
                    i=rng.choice(WIDE_ITEMS), k=rng.choice(COLOURS), w=rng.choice(CHATTER_WHEN))


def wide_world(rng):
    q = rng.choice(WIDE_WORLD)
    return q.format(p=rng.choice(WIDE_CITIES), q=rng.choice(WIDE_CITIES), c=rng.choice(COUNTRIES_WIDE))


def echo_word(rng):
    if AUG["echo_made_up"] and rng.random() < AUG["echo_made_up"]:
        return made_up_word(rng).lower()
    return rng.choice(ECHO_WORDS)


def chatter(rng):
    if rng.random() < 0.4:
        return rng.choice(CHATTER_PLAIN)
    return f"My {rng.choice(CHATTER_SUBJECTS)} {rng.choice(CHATTER_DID)} {rng.choice(CHATTER_WHEN)}."


def lower_first(text, keep=()):
    """text with its first letter lower-cased, as it no longer opens a sentence; but "I" and a
    capitalised stated value (keep: the values) stay as they are: "Um, Aoife is my name", not "aoife"."""
    if text.startswith(("I ", "I'")) or any(v[:1].isupper() and text.startswith(v) for v in keep):
        return text
    return text[:1].lower() + text[1:]


def after(opener, text, keep=()):
    """text after an opener: lower-cased first letter unless the opener ends a sentence."""
    return opener + (text if opener.rstrip()[-1:] in ".!?" else lower_first(text, keep))


def wrap(rng, text, split, p_open=0.35, p_close=0.25, keep=()):
    """The core sentence with an optional opener/closer (and, in training, small talk around it)."""
    if rng.random() < p_open:
        if split == "train" and rng.random() < 0.3:
            text = chatter(rng) + " " + text
        else:
            text = after(rng.choice(OPENERS[split]), text, keep)
    if rng.random() < p_close:
        text += " " + chatter(rng) if split == "train" and rng.random() < 0.3 else rng.choice(CLOSERS[split])
    return text


def ask_text(rng, kind, split):
    f, r = FACTS[kind], rng.random()
    if r < 0.45:
        return rng.choice(NP_LEADS[split]).format(o=rng.choice(f["np"][split]))
    if r < 0.7:
        return rng.choice(WH_LEADS[split]).format(o=rng.choice(f["wh"][split]))
    return rng.choice(f["ask"][split])


def distractor(rng):
    """A word the message does not need: made up, or a common word from the training pools."""
    return made_up_word(rng).lower() if rng.random() < 0.5 else rng.choice(ECHO_WORDS + FILLERS)


def insert_distractors(rng, text, avoid=None):
    """text with one to three distractor() words between its words (never next to a word
    containing `avoid`), with probability AUG["distractors"]."""
    if not (AUG["distractors"] and rng.random() < AUG["distractors"]):
        return text
    ws = text.split(" ")
    spots = [i for i in range(1, len(ws)) if not avoid or (avoid not in ws[i - 1] and avoid not in ws[i])]
    for i in sorted(rng.sample(spots, min(len(spots), rng.randint(1, 3))), reverse=True):
        ws.insert(i, distractor(rng))
    return " ".join(ws)


def state_text(rng, kinds, values, split, keep):
    """The message stating `kinds`; keep: their values, whose case lower_first leaves alone."""
    parts = []
    for k in kinds:
        frame = rng.choice(FACTS[k]["state"][split])
        if AUG["trailers"] and rng.random() < AUG["trailers"]:
            if k != "list" and AUG["unknown_after_value"] and rng.random() < AUG["unknown_after_value"]:
                frame += " " + distractor(rng)
            else:
                frame += rng.choice(LIST_TRAILERS if k == "list" else TRAILERS)
        parts.append(insert_distractors(rng, frame, "{x}").format(x=values[k]))
    parts = [p[0].upper() + p[1:] for p in parts]
    if len(parts) == 1:
        return parts[0] + "."
    if rng.random() < 0.5:
        return " ".join(p + "." for p in parts)
    return (", ".join([parts[0]] + [lower_first(p, keep) for p in parts[1:-1]]) + " and "
            + lower_first(parts[-1], keep) + ".")


def ack_text(kinds, values):
    if AUG["restate"]:  # "Got it: your list is milk and eggs; you live in Lisbon."
        said = "; ".join(lower_first(FACTS[k]["answer"].format(x=values[k]))[:-1] for k in kinds if k != "name")
        if "name" in kinds:
            return f"Nice to meet you, {values['name']}! " + (said[0].upper() + said[1:] + "." if said else
                                                              "I will remember that.")
        return f"Got it: {said}."
    if "name" in kinds:
        return f"Nice to meet you, {values['name']}! I will remember that."
    return "Got it, I will remember that."


def filler_turn(rng, split):
    """(user, assistant, kind or None): an unrelated turn; kind names a measured skill or "echo"."""
    if AUG["late_greetings"] and rng.random() < AUG["late_greetings"]:  # "Hello!" after other turns
        return rng.choice(GREETINGS[split]), GREETING_REPLY, None
    r = rng.random()
    if r < 0.25:
        a, b = rng.randint(0, 9), rng.randint(0, 9)
        sub = rng.random() < 0.5
        if sub and a < b:  # single-digit subtraction without negative answers
            a, b = b, a
        q = rng.choice((ARITH_SUB if sub else ARITH)[split]).format(a=a, b=b)
        return wrap(rng, q, split, 0.15, 0.1), f"The answer is {a - b if sub else a + b}.", "arithmetic"
    if r < 0.4 and AUG["wide"] and rng.random() < AUG["wide"]:
        return wrap(rng, wide_world(rng), split, 0.15, 0.1), UNKNOWN_REPLY, "unknown"
    if r < 0.4:
        q = rng.choice(WORLD[split])
        c = rng.choice(COUNTRIES[split])
        if AUG["made_up_places"] and rng.random() < AUG["made_up_places"]:
            c = made_up_word(rng) + rng.choice(PLACE_SUFFIXES)
        q = q.format(c=c, t=rng.choice(THINGS) if "{t}" in q else "")
        return wrap(rng, q, split, 0.15, 0.1), UNKNOWN_REPLY, "unknown"
    if r < 0.5:
        return rng.choice(THANKS[split]), THANKS_REPLY, "greeting"
    if r < 0.65 or (AUG["echo_extra"] and rng.random() < AUG["echo_extra"]):
        w = " ".join(echo_word(rng) for _ in range(rng.randint(2, 5)))
        return rng.choice(ECHO[split]).format(w=w), w, "echo"
    if r < 0.8:
        return wide_chatter(rng) if AUG["wide"] and rng.random() < AUG["wide"] else chatter(rng), "I see.", None
    q, a = rng.choice(SMALL_TALK)
    return q, a, None


# What the reply to a measured filler turn must contain: " 7." (so "17." fails), "welcome",
# "I don't know.".
FILLER_EXPECT = {"arithmetic": lambda reply: reply[reply.rfind(" "):], "greeting": lambda reply: "welcome",
                 "unknown": lambda reply: reply}


def plan(rng, n_turns):
    """Which turn states which facts and which turn asks about which, for an n-turn conversation.

    Returns (states: {turn: [kinds]}, asks: {turn: kind or ('unknown', kind)})."""
    kinds = rng.sample(sorted(FACTS), rng.randint(1, min(4, max(1, n_turns - 1))))
    states, asks = {}, {}
    for k in kinds:
        for _ in range(20):
            s = rng.randrange(0, max(1, n_turns - 1))
            if s in asks:
                continue
            later = [t for t in range(s + 1, min(n_turns, s + 9)) if t not in asks and t not in states]
            if not later:
                continue
            if s in states and len(states[s]) >= 3:
                continue
            states.setdefault(s, []).append(k)
            asks[rng.choice(later)] = k
            break
    unstated = [k for k in sorted(FACTS) if k not in [x for v in states.values() for x in v]]
    free = [t for t in range(n_turns) if t not in states and t not in asks]
    if free and unstated and rng.random() < 0.6:
        asks[rng.choice(free)] = ("unknown", rng.choice(unstated))
    return states, asks


def conversation(rng, split, n_turns, aug=None):
    """One conversation of n_turns exchanges: (messages, checks). aug: an rng for augment()."""
    states, asks = plan(rng, n_turns)
    values = {k: FACTS[k]["draw"](rng, split) for ks in states.values() for k in ks}
    msgs, checks = [], []
    for t in range(n_turns):
        check, verbatim, keep = None, False, ()
        if t in states:
            ks = states[t]
            keep = tuple(values[k] for k in ks)  # stated values keep their case (lower_first)
            user = wrap(rng, state_text(rng, ks, values, split, keep), split, keep=keep)
            if t == 0 and rng.random() < 0.3:
                user = after(rng.choice(HELLO_OPENERS[split]), user, keep)
            reply = ack_text(ks, values)
        elif t in asks and isinstance(asks[t], tuple):
            user, reply = wrap(rng, ask_text(rng, asks[t][1], split), split), UNKNOWN_REPLY
            check = {"kind": "unknown", "expect": [UNKNOWN_REPLY]}
        elif t in asks:
            k = asks[t]
            user, reply = wrap(rng, ask_text(rng, k, split), split), FACTS[k]["answer"].format(x=values[k])
            check = {"kind": "recall", "fact": k, "expect": [" " + values[k] + "."]}
        elif t == 0 and rng.random() < 0.5:
            user, reply = rng.choice(GREETINGS[split]), GREETING_REPLY
            check = {"kind": "greeting", "expect": ["Hello"]}
        else:
            user, reply, kind = filler_turn(rng, split)
            verbatim = kind == "echo"
            if kind in FILLER_EXPECT:
                check = {"kind": kind, "expect": [FILLER_EXPECT[kind](reply)]}
        if aug:
            user = augment(aug, user, t in states or verbatim, keep)
        if check:
            checks.append({"turn": len(msgs), **check})
        msgs += [{"role": "user", "content": user}, {"role": "assistant", "content": reply}]
    return msgs, checks


# ---------------------------------------------------------------- augmentation (--augment)
# A second training set, used for the last phase: more frames for the same skills and noise
# around what the user says (lead-ins, tails, filler words, missing punctuation), so the
# model keys on the words that matter. None of it comes from the held-out pools.
EXTRA = [
    (ARITH["train"], ["Solve {a} + {b}.", "Find {a} plus {b}.", "Give me {a} plus {b}.", "Do {a} + {b}.",
                      "Result of {a} + {b}?", "{a} plus {b} equals what?", "What does {a} plus {b} make?",
                      "Tell me {a} plus {b}.", "Can you add {a} and {b}?", "Add {b} to {a}.",
                      "What is the sum of {a} and {b}?", "{a} + {b}"]),
    (ARITH_SUB["train"], ["Solve {a} - {b}.", "Find {a} minus {b}.", "Give me {a} minus {b}.", "Do {a} - {b}.",
                          "Result of {a} - {b}?", "{a} minus {b} equals what?", "What does {a} minus {b} make?",
                          "Tell me {a} minus {b}.", "Can you subtract {b} from {a}?", "Take {b} away from {a}.",
                          "{a} - {b}"]),
    (WORLD["train"], ["Who invented the {t}?", "When was the {t} invented?", "What is the biggest city in {c}?",
                      "Why is the sky blue?", "What is the speed of light?", "What is the national animal of {c}?",
                      "How high is the highest building in {c}?", "What is the best phone to buy?",
                      "Who will win the election?", "What should I cook tonight?", "What is the currency of {c}?",
                      "Who was the first king of {c}?", "Where is {c}?", "What is the stock price today?",
                      "How many {t}s are there in the world?", "Who is the richest person in {c}?"]),
    (NP_LEADS["train"], ["Can you say {o}?", "Could you tell me {o}?", "What's {o} again?", "Say {o} again.",
                         "Give me {o}.", "Please repeat {o}.", "Let me hear {o}.", "And {o}?"]),
    (WH_LEADS["train"], ["Could you tell me {o}?", "Can you remember {o}?", "Please tell me {o}.",
                         "I'd like to know {o}.", "Tell me again {o}."]),
    (THANKS["train"], ["Thanks so much.", "Thank you, that is great.", "Okay, thanks.", "thank you", "Thx!",
                       "Great, thank you!", "Thanks again!", "Perfect, thanks."]),
    (GREETINGS["train"], ["Hello, hello!", "Hi hi!", "Hey you!", "Good evening!", "Hi, hello there!", "Hello friend!"]),
]
THINGS = words("telephone bicycle radio computer camera car television engine")
LEADINS = ["Okay so ", "Question: ", "Next question: ", "Another one: ", "Let me ask: ", "I have a question: ",
           "Sorry, ", "Excuse me, ", "Random question: ", "Hey again, ", "And ", "Oh, ", "Hi again! ", "Ah, ",
           "Yes. ", "No worries. ", "Great. ", "Good. ", "Nice. ", "Cool. ", "Haha. ", "Wait, ", "Actually, ",
           "Sure. ", "Another thing: ", "Next: ", "Okay, next. "]
TAILS = [" Please answer.", " Thanks in advance.", " Just curious.", " Be brief.", " I wonder.", " Thank you!",
         " :D", " ;)", " please", "!!", " ok?", " Please help.", " Thanks, friend."]
FILLERS = words("please again now exactly just actually really then maybe kindly honestly still quickly so also "
                "perhaps even simply")


def augment(rng, text, verbatim, keep=()):
    """Noise around a user message; one whose words the reply copies (facts stated, words to
    repeat) only gets a lead-in. keep: the values it states (lower_first)."""
    if rng.random() < 0.25:
        text = after(rng.choice(LEADINS), text, keep) if rng.random() < 0.7 else chatter(rng) + " " + text
    if verbatim:
        return text
    if rng.random() < 0.15:
        text += rng.choice(TAILS)
    ws = text.split(" ")
    plain = [i for i in range(1, len(ws)) if ws[i - 1].isalpha() and ws[i].isalpha() and ws[i].islower()]
    if plain and rng.random() < 0.3:
        for i in sorted(rng.sample(plain, min(len(plain), rng.randint(1, 2))), reverse=True):
            ws.insert(i, rng.choice(FILLERS))
        text = " ".join(ws)
    if rng.random() < 0.1 and text[-1:] in ".?!":
        text = text[:-1]
    return insert_distractors(rng, text)


# ---------------------------------------------------------------- grammar (--grammar, --positions)
# Stating and asking frames composed from parts (more_pools.py: a noun phrase naming the
# fact, a pattern around it, verb frames of each fact), many more than the hand-written
# lists, so that the model keys on what a sentence is about rather than on the sentences it
# saw. A composed frame equal to a held-out one is dropped. Also: list items with a word in
# front ("red apples", "sunlamps": a piece that is usually something else can start an item)
# and world questions about made-up places (a name in a question is not a fact about the
# user). --positions: frames with the value first, and words after a stated value.
def composed_frames(kind, patterns):
    """Stating frames of a fact from patterns around its noun phrases, lower-cased first letter
    (state_text capitalises)."""
    singular, plural = STATE_NP[kind]
    return [p.format(np=np, x="{x}", **{"is": "are" if np in plural else "is"})
            for np in singular + plural for p in patterns]


def add_training_frames(part, frames_of):
    """frames_of(kind) added to the training frames of each fact, less any held-out frame."""
    for kind, f in FACTS.items():
        held = {h.lower() for h in f[part]["heldout"]}
        f[part]["train"].extend(fr for fr in frames_of(kind) if fr.lower() not in held)


def compound_item(rng):
    """A list item with a word in front: "red apples", "sunlamps"."""
    head = rng.choice(COLOURS + ECHO_WORDS + [w.rstrip("s") for w in TRAIN_ITEMS])
    return head + (" " if rng.random() < 0.5 else "") + rng.choice(TRAIN_ITEMS)


@functools.cache
def heldout_pool_docs():
    """Every held-out pool file (tests/data/chat_heldout*_pools.json), parsed once."""
    files = pathlib.Path(__file__).resolve().parents[2].glob("tests/data/chat_heldout*_pools.json")
    return tuple(json.loads(f.read_text()) for f in sorted(files))


def heldout_strings(*path):
    """Lower-cased entries under `path` (keys, e.g. "np_leads" or "facts", "city", "state") of every
    held-out pool file: training frames leave them out."""
    return {h.lower() for doc in heldout_pool_docs() for h in functools.reduce(dict.get, path, doc)}


def extend_unless_heldout(pool, key, frames):
    """`frames` added to pool["train"], less pool["heldout"]'s and the held-out pool files' `key` entries."""
    held = heldout_strings(key) | {h.lower() for h in pool["heldout"]}
    pool["train"].extend(f for f in frames if f.lower() not in held)


# ---------------------------------------------------------------- paraphrases (--paraphrases)
# Phrasings written for training by writers who saw neither this script nor any held-out pool,
# only a description of the skills (tools/train/paraphrases/*.json, load_heldout_pools' layout
# without values; a file may hold only some of its pools, as writers 10-12's greetings and
# thanks): the kind of English the held-out sets are written in, which frames composed from
# parts do not reach.
PARAPHRASE_DIR = pathlib.Path(__file__).resolve().parent / "paraphrases"
# Pools of whole phrasings other than the facts', with their key in a pool file (held-out or paraphrase).
PHRASE_POOLS = ((NP_LEADS, "np_leads"), (WH_LEADS, "wh_leads"), (OPENERS, "openers"), (CLOSERS, "closers"),
                (GREETINGS, "greetings"), (THANKS, "thanks"), (ARITH, "arith_add"), (ARITH_SUB, "arith_sub"),
                (WORLD, "world"))
# The placeholder sets an entry of each part may hold (sorted; every other part: none).
PLACEHOLDERS = {"state": [["x"]], "np_leads": [["o"]], "wh_leads": [["o"]], "arith_add": [["a", "b"]],
                "arith_sub": [["a", "b"]], "world": [[], ["c"]]}


def word_set(text):
    """The words of `text` (lower case, letters, digits, apostrophes and placeholders), as held-out entries are compared."""
    return frozenset(re.sub(r"[^a-z0-9{}']+", " ", text.lower()).split())


def near(a, b, threshold=0.7):
    """Whether word sets a and b share at least `threshold` of their union (one word apart in a 4-word sentence)."""
    return len(a & b) >= threshold * len(a | b)


def placeholders_fit(text, part):
    """Whether `text` holds exactly the placeholders its pool fills in (each once), and no other braces."""
    try:
        fields = sorted(f for _, f, _, _ in string.Formatter().parse(text) if f is not None)
    except ValueError:
        return False
    return fields in PLACEHOLDERS.get(part, [[]])


def add_paraphrases(pattern, share=1 / 3):
    """The entries of every paraphrase file matching `pattern` added to the training pools, less
    entries with wrong placeholders and those near() a held-out entry of the pool (so that a
    held-out phrasing is not one word away from a trained one). Where a pool holds many built-in frames
    (hundreds composed from parts) the paraphrases enter it several times, so that they make at
    least `share` of its draws."""
    files = sorted(PARAPHRASE_DIR.glob(pattern))
    if not files:
        raise SystemExit(f"--paraphrases: no file matches {PARAPHRASE_DIR / pattern}")
    docs = [json.loads(f.read_text()) for f in files]
    pools = [(FACTS[kind][part], ("facts", kind, part), part) for kind in FACTS for part in ("state", "np", "wh", "ask")]
    pools += [(pool, (key,), key) for pool, key in PHRASE_POOLS]
    for pool, path, part in pools:
        held = [word_set(h) for h in heldout_strings(*path) | set(pool["heldout"])]
        seen = {word_set(t) for t in pool["train"]}
        new = []
        for doc in docs:
            for text in functools.reduce(lambda d, key: d.get(key, {}), path, doc) or []:
                words_of = word_set(text)
                if placeholders_fit(text, part) and words_of not in seen and not any(near(words_of, h) for h in held):
                    seen.add(words_of)
                    new.append(text)
        if new:
            copies = max(1, math.ceil(share * len(pool["train"]) / ((1 - share) * len(new))))
            pool["train"].extend(new * copies)


def extend_training_pools(opts, paraphrase_files=None):
    """The training pools --augment draws from, and what the options in `opts` (gen_data.py's
    flags, spelt with underscores: "wide", "arith_frames", ...) add to them, and the paraphrase
    files matching the glob `paraphrase_files` (none when it is None)."""
    for pool, more in EXTRA:
        pool.extend(more)
    for kind, extra in FACT_EXTRA.items():
        for part, more in extra.items():
            FACTS[kind][part]["train"].extend(more)
    if "wide_items" in opts and "wide" not in opts:  # singular forms of held-out items ("pepper") left out too
        held = {w.rstrip("s") for w in HELDOUT_ITEMS}
        TRAIN_ITEMS.extend(w for w in WIDE_ITEMS if w.rstrip("s") not in held)
    if "wide" in opts:
        for pool, more in ((TRAIN_NAMES, WIDE_NAMES), (TRAIN_CITIES, WIDE_CITIES), (TRAIN_PETS, WIDE_PETS),
                           (TRAIN_ITEMS, WIDE_ITEMS), (COUNTRIES["train"], COUNTRIES_WIDE),
                           (NP_LEADS["train"], WIDE_NP_LEADS), (WH_LEADS["train"], WIDE_WH_LEADS)):
            pool.extend(more)
    if "grammar" in opts:
        add_training_frames("state", lambda kind: composed_frames(kind, STATE_PATTERNS) + STATE_VERBS[kind])
        add_training_frames("ask", lambda kind: ASK_GRAMMAR[kind])
    if "positions" in opts:
        # twice: a value opening the sentence is where the model misread most (its first letter
        # capitalised, "Pink has always been my colour"; tools/train/README.md, session 31)
        add_training_frames("state", lambda kind: composed_frames(kind, STATE_VALUE_FIRST) * 2)
    if "variety" in opts:
        add_training_frames("state", variety_frames)
        TRAILERS.extend(VARIETY_TRAILERS)
        OPENERS["train"].extend(VARIETY_OPENERS)
        CLOSERS["train"].extend(VARIETY_CLOSERS)
    if "arith_frames" in opts:
        for pool, op, key in ((ARITH, "add", "arith_add"), (ARITH_SUB, "sub", "arith_sub")):
            extend_unless_heldout(pool, key, frames_from_parts(more_pools.ARITH_LEADS, more_pools.ARITH_EXPRS[op],
                                                               more_pools.ARITH_TAILS))
    if "ask_frames" in opts:
        extend_unless_heldout(NP_LEADS, "np_leads",
                              frames_from_parts(more_pools.ASK_LEADS, ["{o}"], more_pools.ASK_TAILS))
    if "distractors" in opts:
        for kind, more in FACT_TRAILING.items():
            FACTS[kind]["state"]["train"].extend(more)
    if paraphrase_files:
        add_paraphrases(paraphrase_files)


def load_heldout_pools(path):
    """Replaces the held-out pools with a JSON file's, written apart from this script (a second
    held-out set: how far the recipe was fitted to the first one). Layout:
    {"facts": {kind: {"state"|"np"|"wh"|"ask": [...]}}, "np_leads", "wh_leads", "openers",
    "closers", "names", "cities", "pets", "items", "greetings", "thanks", "arith_add",
    "arith_sub", "countries", "world", "echo": [...]}. Entries a training pool holds
    (case-insensitive) are dropped."""
    with open(path) as f:
        d = json.load(f)
    for kind, parts in d["facts"].items():
        for part, new in parts.items():
            FACTS[kind][part]["heldout"] = fresh(new, FACTS[kind][part]["train"])
    for pools, key in PHRASE_POOLS + ((COUNTRIES, "countries"), (ECHO, "echo")):
        pools["heldout"] = fresh(d[key], pools["train"])
    empty = [k for k, parts in FACTS.items() for part in ("state", "np", "wh", "ask") if not parts[part]["heldout"]]
    empty += ["countries"] if len(COUNTRIES["heldout"]) < 5 else []
    load_heldout_values(path, d, empty)


def fresh(new, *train):
    """new less the entries any of the train pools holds (case-insensitive)."""
    seen = {w.lower() for pool in train for w in pool}
    return [w for w in new if w.lower() not in seen]


def load_heldout_values(path, d, empty=()):
    """Replaces the held-out names, cities, pets and list items with d's "names", "cities",
    "pets", "items" (less those a training pool holds)."""
    for pool, train, key in ((HELDOUT_NAMES, TRAIN_NAMES, "names"), (HELDOUT_CITIES, TRAIN_CITIES, "cities"),
                             (HELDOUT_PETS, TRAIN_PETS, "pets"), (HELDOUT_ITEMS, TRAIN_ITEMS, "items")):
        pool[:] = fresh(d[key], train)
    empty = list(empty) + [k for k, pool in (("names", HELDOUT_NAMES), ("cities", HELDOUT_CITIES),
                                             ("pets", HELDOUT_PETS), ("items", HELDOUT_ITEMS)) if len(pool) < 5]
    if empty:
        sys.exit(f"{path}: too few entries left once those of the training pools are dropped: {empty}")


def load_vocab_pieces(path):
    from bpe import Tokenizer
    tok = Tokenizer.load(path)
    pieces = {tok.decode([i]).strip() for i in range(tok.n_vocab)}
    VOCAB_PIECES.extend(sorted(p for p in pieces if len(p) >= 2 and p.isascii() and p.isalpha()))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", choices=["train", "heldout"], required=True)
    ap.add_argument("--count", type=int, default=0, help="training conversations")
    ap.add_argument("--per-length", type=int, default=0, help="held-out conversations of each length")
    ap.add_argument("--max-turns", type=int, default=24)
    ap.add_argument("--augment", action="store_true", help="training: more frames and noise (augment())")
    ap.add_argument("--distractors", action="store_true",
                    help="with --augment: unknown words inserted into messages, frames with words after the value")
    ap.add_argument("--wide", type=float, default=0.0,
                    help="with --augment: draw from the WIDE_ pools too, and build this share of world questions "
                         "and chatter from them (an experiment; the committed model is trained without it)")
    ap.add_argument("--grammar", action="store_true",
                    help="with --augment: composed stating/asking frames, items with a word in front, world "
                         "questions about made-up places")
    ap.add_argument("--positions", action="store_true",
                    help="with --augment: stating frames with the value first, and words after the value")
    ap.add_argument("--wide-items", action="store_true",
                    help="with --augment: list items from WIDE_ITEMS too (real words the tokenizer splits)")
    ap.add_argument("--variety", action="store_true",
                    help="with --augment: stating frames around what marks each fact in ordinary speech (a species, "
                         "who gave a name, a colour alone), words after the value, more openers and closers")
    ap.add_argument("--restate", action="store_true",
                    help="with --augment: the reply to a stated fact repeats it (\"Got it: you live in Lisbon.\"), "
                         "so a later question finds it in a fixed form")
    ap.add_argument("--arith-frames", action="store_true",
                    help="with --augment: sums composed from ~30 leads, 7 expressions and 15 tails")
    ap.add_argument("--ask-frames", action="store_true",
                    help="with --augment: questions composed from ~25 leads, the fact's noun phrase and ~18 tails")
    ap.add_argument("--paraphrases", nargs="?", const="*.json", metavar="GLOB",
                    help="with --augment: phrasings from the files of tools/train/paraphrases/ matching GLOB (all "
                         "when omitted; written apart from this script and the held-out pools), at least a third "
                         "of each pool's draws")
    ap.add_argument("--vocab-pieces", metavar="TOKENIZER_JSON",
                    help="with --augment: 40%% of made-up words glued from this tokenizer's letter-only tokens")
    ap.add_argument("--value-shapes", action="store_true",
                    help="with --augment: 30%% of names, cities, pets and list items of several words (\"Mary "
                         "Ann\", \"New Brovania\", \"Mr Whiskers\", \"baking powder\") or with an accented letter; "
                         "unknown words right after a stated value; greetings in mid-conversation")
    ap.add_argument("--heldout-pools", metavar="JSON",
                    help="with --split heldout: phrasings and values from this file (layout: load_heldout_pools) "
                         "instead of the built-in held-out pools, less anything a training pool holds")
    ap.add_argument("--heldout-values", metavar="JSON",
                    help="with --split heldout: names, cities, pets and list items from this file (keys \"names\", "
                         "\"cities\", \"pets\", \"items\") instead of the built-in held-out ones")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    aug = None
    if args.augment:
        assert args.split == "train", "the held-out set is never augmented"
        extend_training_pools({k for k in ("wide", "grammar", "positions", "wide_items", "distractors", "variety",
                                           "arith_frames", "ask_frames") if getattr(args, k)},
                              args.paraphrases)
        AUG.update(random_letters=0.5, made_up_items=0.3, echo_made_up=0.6, echo_extra=0.3)
        if args.wide:
            AUG["wide"] = args.wide
        if args.grammar:
            AUG.update(compound_items=0.3, made_up_places=0.5)
        if args.distractors:
            AUG["distractors"] = 0.35
        if args.restate:
            AUG["restate"] = 1.0
        if args.positions:
            AUG["trailers"] = 0.3
        if args.value_shapes:
            AUG.update(value_shapes=0.3, unknown_after_value=0.3, late_greetings=0.03)
        if args.vocab_pieces:
            load_vocab_pieces(args.vocab_pieces)
            AUG["vocab_pieces"] = 0.4
        aug = random.Random(args.seed + 1)
    if args.heldout_pools:
        assert args.split == "heldout", "--heldout-pools replaces the held-out pools"
        extend_training_pools({"wide", "grammar", "positions", "distractors", "variety"})  # all training can draw from
        load_heldout_pools(args.heldout_pools)
    if args.heldout_values:
        assert args.split == "heldout", "--heldout-values replaces held-out values"
        with open(args.heldout_values) as f:
            load_heldout_values(args.heldout_values, json.load(f))
    if args.split == "train":
        lengths = [rng.choice([1, 2, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, args.max_turns]) for _ in range(args.count)]
    else:
        lengths = [n for n in HELDOUT_LENGTHS for _ in range(args.per_length)]
    with open(args.out, "w") as f:
        for n in lengths:
            msgs, checks = conversation(rng, args.split, n, aug)
            f.write(json.dumps({"messages": msgs, "turns": n, "checks": checks}) + "\n")


if __name__ == "__main__":
    main()
