#!/usr/bin/env python3
"""Synthetic multi-turn conversations for training warmstart's small chat model.

Every conversation is a list of {"role", "content"} messages (user/assistant
alternating). The user states facts early (a name, a number, a city, a colour, a
pet's name, a food, a short list ...), the assistant acknowledges, a few unrelated
tasks follow (arithmetic, echo, upper-casing, reversing or counting a list), and
then the user asks about the facts stated several turns earlier.

The phrasings used to state and to ask about a fact come from template pools that
are split in two: the "train" part is used for training conversations, the
"heldout" part only for evaluation conversations, so that recall is measured on
phrasings the model never saw. The answers use a fixed form per fact type, so that
"the answer contains the expected fact" is an easy check.

Usage:
  gen_data.py --split train --count 20000 --seed 1 --out train.jsonl
  gen_data.py --split heldout --count 40 --seed 7 --out heldout.jsonl
Each output line: {"messages": [...], "checks": [{"turn": i, "expect": "..."}]}
where `turn` is the index of the user message whose reply must contain `expect`.
"""
import argparse
import json
import random

# ---------------------------------------------------------------- vocabularies

NAMES = """Anna Ben Clara David Emma Felix Grace Henry Iris Jack Kara Leo Maya Nina Oscar
Paula Quinn Rosa Sam Tara Uma Victor Wendy Xavier Yara Zoe Adam Bella Carl Diana Eric
Fiona George Hannah Ivan Julia Kevin Laura Mark Nora Owen Peter Ruth Simon Tina Walter
Alice Bruno Chloe Daniel Elena Frank Gina Hugo Irene Jonas Kim Lucas Mia Noah Olga Pablo
Rita Sofia Tom Vera William Amir Bianca Chen Dmitri Esther Farid Greta Hiro Ines Jamal
Keiko Lars Marta Nadia Omar Priya Raj Sara Theo Ulla Vik Yusuf Zara Lena Max Ella Finn
Ava Liam Otto Ida Emil Alma Axel Lily Ruby Jake Leah Cody Dana Gabe Holly""".split()

PETS = """Rex Bella Milo Luna Max Coco Rocky Daisy Teddy Nala Simba Oreo Pepper Bruno Mochi
Biscuit Ziggy Shadow Ginger Loki Tiger Buddy Peanut Pixel Waffles Noodle Pickles Muffin
Cookie Sparky Fluffy Bandit Marley Olive Juno Kiwi Tofu Bean""".split()

CITIES = """Paris London Berlin Madrid Rome Lisbon Vienna Prague Oslo Dublin Athens Warsaw
Tokyo Seoul Beijing Delhi Cairo Lagos Nairobi Sydney Toronto Chicago Boston Denver Austin
Seattle Miami Lima Bogota Quito Santiago Havana Moscow Kyiv Helsinki Stockholm Zurich
Geneva Munich Hamburg Milan Naples Porto Seville Valencia Lyon Nice Brussels Amsterdam
Copenhagen Riga Vilnius Tallinn Budapest Bucharest Sofia Istanbul Dubai Mumbai Bangkok
Hanoi Manila Jakarta Osaka Kyoto Perth Auckland Montreal Vancouver Dallas Phoenix Houston""".split()

COLOURS = """red blue green yellow orange purple pink brown black white grey silver gold
teal violet indigo maroon navy beige turquoise""".split()

FOODS = """pizza pasta sushi rice soup salad tacos curry bread cheese noodles pancakes
burgers dumplings steak chocolate apples bananas oranges cake ramen falafel""".split()

ITEMS = """apples milk eggs bread butter rice tea coffee sugar salt onions carrots lemons
cheese pasta beans flour honey oats yogurt soap paper pens books socks shoes hats cups
plates spoons forks candles batteries lamps keys maps tickets stamps envelopes""".split()

ANIMALS = """cat dog horse rabbit parrot hamster turtle goldfish snake lizard""".split()

JOBS = """teacher doctor nurse pilot chef farmer baker painter writer lawyer engineer
dentist driver singer dancer plumber artist student scientist librarian""".split()

ECHO_WORDS = """sun moon star tree river stone cloud rain snow wind fire light dark blue
red green quick slow happy small big cold warm old new bright soft loud calm wild
cat dog bird fish frog bear fox owl wolf lion mouse apple bread milk cake tea jam
door book pen cup box road hill lake sea boat car bus train ship house garden""".split()

# ---------------------------------------------------------------- fact types
# Each fact: how to draw a value, state templates, ask templates (both split into
# train and heldout pools), the assistant's acknowledgement and its answer.
# `{x}` is the value. Heldout templates reuse the key words (name, colour, city...)
# in sentence shapes that the train pool does not contain.


def draw_number(rng):
    return str(rng.choice([rng.randint(2, 99), rng.randint(100, 999), rng.randint(1000, 9999)]))


def draw_list(rng):
    return ", ".join(rng.sample(ITEMS, 3))


FACTS = {
    "name": dict(
        draw=lambda rng: rng.choice(NAMES),
        state_train=[
            "My name is {x}.", "I'm {x}.", "Call me {x}.", "You can call me {x}.",
            "Hi, I am {x}.", "Hello, my name is {x}.", "The name's {x}.", "Name: {x}.",
            "My name's {x}.", "Hey there, {x} here.", "I am called {x}.", "Everyone calls me {x}.",
            "Just so you know, my name is {x}.", "Please remember that my name is {x}.",
            "Let me introduce myself: I'm {x}.", "Hi! The name is {x}.",
        ],
        state_heldout=[
            "People know me by the name {x}.", "Nice to meet you, I go by {x}.",
            "For the record, my first name is {x}.", "Remember this name, it is mine: {x}.",
        ],
        ask_train=[
            "What is my name?", "What's my name?", "Do you remember my name?", "Who am I?",
            "What did I say my name was?", "Can you tell me my name?", "Remind me of my name.",
            "What name did I give you?", "Tell me my name.", "Say my name.", "My name is what?",
            "Which name did I tell you?",
        ],
        ask_heldout=[
            "Quick question: what was my name again?", "Could you repeat the name I told you?",
            "Do you still know what I am called?", "I forgot, which name did I introduce myself with?",
        ],
        ack=["Nice to meet you, {x}.", "Hello, {x}!", "Hi {x}, I will remember your name.", "Got it, {x}."],
        answer=["Your name is {x}."],
    ),
    "number": dict(
        draw=draw_number,
        state_train=[
            "My favourite number is {x}.", "My lucky number is {x}.", "Remember the number {x}.",
            "The number is {x}.", "Please remember this number: {x}.", "My number is {x}.",
            "Keep this number in mind: {x}.", "Note the number {x}.", "I like the number {x}.",
            "Here is a number for you: {x}.", "Store this number: {x}.", "My code number is {x}.",
        ],
        state_heldout=[
            "Can you memorize a number for me? It is {x}.", "The secret number I picked is {x}.",
            "A number to keep for later: {x}.", "I chose the number {x}, hold on to it.",
        ],
        ask_train=[
            "What is my number?", "What number did I tell you?", "What was the number?",
            "Which number did I give you?", "Tell me the number.", "What's my lucky number?",
            "Do you remember the number?", "Remind me of the number.", "What number was it?",
            "Can you tell me the number I gave you?",
        ],
        ask_heldout=[
            "Which number did I ask you to remember?", "What was the number from before?",
            "Say the number I mentioned earlier.", "Could you repeat my number?",
        ],
        ack=["Okay, I will remember {x}.", "Got it: {x}.", "Noted, the number is {x}.", "Sure, {x}."],
        answer=["The number is {x}."],
    ),
    "city": dict(
        draw=lambda rng: rng.choice(CITIES),
        state_train=[
            "I live in {x}.", "I'm from {x}.", "My home city is {x}.", "I come from {x}.",
            "My city is {x}.", "I was born in {x}.", "I moved to {x} last year.", "Home for me is {x}.",
            "I stay in {x}.", "My town is {x}.", "I grew up in {x}.", "These days I live in {x}.",
        ],
        state_heldout=[
            "Where do I live? In {x}, so keep that in mind.", "My address is in the city of {x}.",
            "I have an apartment in {x}.", "The city I call home is {x}.",
        ],
        ask_train=[
            "Where do I live?", "What city do I live in?", "Where am I from?", "What is my city?",
            "Which city did I mention?", "Do you remember where I live?", "Where is my home?",
            "Tell me my city.", "What's my home city?", "Which town am I from?",
        ],
        ask_heldout=[
            "In which city is my home?", "Can you recall the city I named?",
            "Remind me where I said I live.", "Which place do I call home?",
        ],
        ack=["{x} sounds lovely.", "Nice, {x}!", "Okay, you live in {x}.", "Got it, {x}."],
        answer=["You live in {x}."],
    ),
    "colour": dict(
        draw=lambda rng: rng.choice(COLOURS),
        state_train=[
            "My favourite colour is {x}.", "My favorite color is {x}.", "I love the colour {x}.",
            "I like {x} best.", "My colour is {x}.", "The colour I like most is {x}.",
            "I really like the color {x}.", "{x} is my favourite colour.", "Best colour ever: {x}.",
            "My favourite color? {x}.", "I always pick {x} as my colour.", "I prefer the colour {x}.",
        ],
        state_heldout=[
            "Of all colours, I enjoy {x} the most.", "If I had to choose one colour it would be {x}.",
            "My room is painted {x} because that colour is my favourite.", "Colour preference: {x}.",
        ],
        ask_train=[
            "What is my favourite colour?", "What's my favorite color?", "Which colour do I like?",
            "What colour did I say?", "Do you remember my favourite colour?", "Tell me my colour.",
            "Which color is my favourite?", "What is my colour?", "Remind me of my favourite colour.",
            "What color do I like best?",
        ],
        ask_heldout=[
            "Which colour did I say I prefer?", "Can you recall my favourite color?",
            "Name the colour I like the most.", "What colour is my favourite again?",
        ],
        ack=["{x} is a great colour.", "Nice choice, {x}.", "Okay, {x}.", "I like {x} too."],
        answer=["Your favourite colour is {x}."],
    ),
    "pet": dict(
        draw=lambda rng: rng.choice(PETS),
        state_train=[
            "My dog is called {x}.", "My cat's name is {x}.", "I have a pet named {x}.",
            "My pet is called {x}.", "Our dog is named {x}.", "My pet's name is {x}.",
            "I have a cat called {x}.", "My puppy is named {x}.", "The name of my pet is {x}.",
            "We call our pet {x}.", "My rabbit is called {x}.", "I named my pet {x}.",
        ],
        state_heldout=[
            "At home I have a little pet, and its name is {x}.", "My parrot answers to {x}.",
            "My pet goes by the name {x}.", "Our family pet is {x}.",
        ],
        ask_train=[
            "What is my pet's name?", "What is my pet called?", "What's the name of my pet?",
            "Do you remember my pet's name?", "What did I name my pet?", "Tell me my pet's name.",
            "What is my dog called?", "Remind me of my pet's name.", "Which name does my pet have?",
            "What do we call our pet?",
        ],
        ask_heldout=[
            "Can you recall what my pet is named?", "What was the name of my pet again?",
            "Which name did I give for my pet?", "How is my pet called?",
        ],
        ack=["{x} is a cute name.", "Aw, {x}!", "Okay, your pet is {x}.", "Lovely, {x}."],
        answer=["Your pet is called {x}."],
    ),
    "food": dict(
        draw=lambda rng: rng.choice(FOODS),
        state_train=[
            "My favourite food is {x}.", "I love eating {x}.", "I really like {x}.",
            "My favorite food is {x}.", "I could eat {x} every day.", "The food I like most is {x}.",
            "{x} is my favourite food.", "I enjoy {x} more than anything.", "My best food is {x}.",
            "I always order {x}.", "Food I love: {x}.", "Nothing beats {x} for me.",
        ],
        state_heldout=[
            "If I could only eat one food, it would be {x}.", "My top food choice is {x}.",
            "For dinner I would always pick {x}, my favourite food.", "Favourite dish: {x}.",
        ],
        ask_train=[
            "What is my favourite food?", "What food do I like?", "What's my favorite food?",
            "Which food do I love?", "Do you remember my favourite food?", "Tell me my favourite food.",
            "What do I like to eat?", "Remind me of my favourite food.", "What food did I mention?",
            "Which food is my favourite?",
        ],
        ask_heldout=[
            "Can you recall which food I enjoy most?", "What was my favourite food again?",
            "Name the food I said I love.", "Which dish do I like best?",
        ],
        ack=["Yum, {x}!", "{x} is tasty.", "Okay, {x}.", "Good choice, {x}."],
        answer=["Your favourite food is {x}."],
    ),
    "job": dict(
        draw=lambda rng: rng.choice(JOBS),
        state_train=[
            "I work as a {x}.", "I am a {x}.", "My job is {x}.", "I'm a {x} by profession.",
            "My job: {x}.", "I have been a {x} for years.", "I make a living as a {x}.",
            "At work I am a {x}.", "My profession is {x}.", "For work, I'm a {x}.",
        ],
        state_heldout=[
            "By trade I am a {x}.", "My occupation is {x}.", "I earn my money working as a {x}.",
            "Job title: {x}.",
        ],
        ask_train=[
            "What is my job?", "What do I do for work?", "What's my job?", "What is my profession?",
            "Do you remember my job?", "Tell me my job.", "What work do I do?", "Remind me of my job.",
            "Which job did I mention?", "What do I work as?",
        ],
        ask_heldout=[
            "Can you recall my occupation?", "What did I say I do for a living?",
            "Which job do I have again?", "Name my job.",
        ],
        ack=["A {x}, nice!", "Okay, you are a {x}.", "Good to know, {x}.", "Cool, a {x}."],
        answer=["Your job is {x}."],
    ),
    "list": dict(
        draw=draw_list,
        state_train=[
            "My shopping list is {x}.", "I need to buy {x}.", "Remember my list: {x}.",
            "Here is my list: {x}.", "Please remember these items: {x}.", "My list: {x}.",
            "I have to get {x}.", "Shopping list: {x}.", "Keep this list: {x}.",
            "The things I need are {x}.", "Add these to my list: {x}.", "On my list are {x}.",
        ],
        state_heldout=[
            "Can you hold on to a list for me? It is {x}.", "Things to pick up later: {x}.",
            "Today I must not forget {x}.", "Store my items: {x}.",
        ],
        ask_train=[
            "What is on my list?", "What is my shopping list?", "What do I need to buy?",
            "What was my list?", "Do you remember my list?", "Tell me my list.",
            "Which items are on my list?", "Remind me of my list.", "What did I need to get?",
            "Read my list back to me.",
        ],
        ask_heldout=[
            "Can you recall the items I gave you?", "What things did I say I must buy?",
            "Repeat my shopping list, please.", "Which items did I ask you to remember?",
        ],
        ack=["Okay, I will remember your list.", "Got it, {x}.", "Noted: {x}.", "Sure, your list is {x}."],
        answer=["Your list is {x}."],
    ),
}

# Light wrappers around a user message, also split train/heldout.
PREFIX_TRAIN = ["", "", "", "", "Hey, ", "Ok, ", "So, ", "By the way, ", "Also, ", "Hi! ", "Well, ", "Right, "]
PREFIX_HELDOUT = ["", "", "Alright then. ", "One more thing: ", "Hmm, "]
SUFFIX_TRAIN = ["", "", "", "", " Thanks!", " Please.", " Thank you.", " :)"]
SUFFIX_HELDOUT = ["", "", " Cheers.", " Much appreciated."]

# ---------------------------------------------------------------- tasks (no memory needed)


def task_add(rng, split):
    a, b = rng.randint(0, 50), rng.randint(0, 50)
    q = rng.choice(["What is {a} + {b}?", "{a} + {b} = ?", "Add {a} and {b}.", "What is {a} plus {b}?",
                    "Compute {a} + {b}.", "Sum of {a} and {b}?"] if split == "train" else
                   ["How much is {a} plus {b}?", "Please add {a} to {b}."])
    return q.format(a=a, b=b), str(a + b)


def task_mul(rng, split):
    a, b = rng.randint(0, 12), rng.randint(0, 12)
    q = rng.choice(["What is {a} * {b}?", "What is {a} times {b}?", "Multiply {a} by {b}.", "{a} x {b} = ?",
                    "Compute {a} * {b}."] if split == "train" else
                   ["How much is {a} times {b}?", "What do you get when you multiply {a} and {b}?"])
    return q.format(a=a, b=b), str(a * b)


def task_sub(rng, split):
    a = rng.randint(0, 50)
    b = rng.randint(0, a)
    q = rng.choice(["What is {a} - {b}?", "What is {a} minus {b}?", "Subtract {b} from {a}."]
                   if split == "train" else ["How much is {a} take away {b}?"])
    return q.format(a=a, b=b), str(a - b)


def words(rng, lo, hi):
    return " ".join(rng.choice(ECHO_WORDS) for _ in range(rng.randint(lo, hi)))


def task_echo(rng, split):
    w = words(rng, 2, 5)
    q = rng.choice(["Repeat after me: {w}", "Say this back: {w}", "Echo: {w}", "Please repeat: {w}",
                    "Copy this exactly: {w}"] if split == "train" else ["Can you say back the words {w}"])
    return q.format(w=w), w


def task_upper(rng, split):
    w = words(rng, 2, 4)
    q = rng.choice(["Uppercase this: {w}", "Write in capitals: {w}", "Make this uppercase: {w}",
                    "Convert to upper case: {w}"] if split == "train" else ["Shout these words in capitals: {w}"])
    return q.format(w=w), w.upper()


def task_reverse(rng, split):
    items = rng.sample(ECHO_WORDS, rng.randint(3, 4))
    q = rng.choice(["Reverse this list: {l}", "Reverse the order: {l}", "Write this list backwards: {l}",
                    "Put these in reverse order: {l}"] if split == "train" else ["Flip the order of {l}"])
    return q.format(l=", ".join(items)), ", ".join(reversed(items))


def task_count(rng, split):
    items = rng.sample(ECHO_WORDS, rng.randint(1, 7))
    q = rng.choice(["How many items are in this list: {l}?", "Count the items: {l}", "How many words: {l}?",
                    "Count these: {l}"] if split == "train" else ["Tell me how many things are here: {l}"])
    return q.format(l=", ".join(items)), str(len(items))


def task_chat(rng, split):
    return rng.choice([
        ("Hello!", "Hello! How can I help you?"), ("How are you?", "I am fine, thank you."),
        ("Thanks!", "You are welcome."), ("Who are you?", "I am a small assistant made by warmstart."),
        ("Can you help me?", "Yes, of course."), ("Good morning.", "Good morning!"),
        ("Tell me a joke.", "Why did the cat sit on the computer? To keep an eye on the mouse."),
        ("What can you do?", "I can remember facts, do small sums, and repeat or format text."),
        ("Bye!", "Goodbye!"), ("Are you a robot?", "I am a small language model."),
    ])


TASKS = [task_add, task_mul, task_sub, task_echo, task_upper, task_reverse, task_count, task_chat]

# ---------------------------------------------------------------- conversations


def wrap(rng, text, split):
    pre = rng.choice(PREFIX_TRAIN if split == "train" else PREFIX_HELDOUT)
    suf = rng.choice(SUFFIX_TRAIN if split == "train" else SUFFIX_HELDOUT)
    if pre and text[:1].isupper() and not text.startswith("I ") and not text.startswith("I'"):
        text = text[0].lower() + text[1:]
    return pre + text + suf


def conversation(rng, split):
    """One conversation; returns (messages, checks)."""
    pool = "train" if split == "train" else "heldout"
    kinds = rng.sample(sorted(FACTS), rng.randint(1, 3))
    values = {k: FACTS[k]["draw"](rng) for k in kinds}
    msgs, checks = [], []

    def say(user, assistant):
        msgs.append({"role": "user", "content": user})
        msgs.append({"role": "assistant", "content": assistant})

    # 1. state the facts: one per turn, or two in one message
    i = 0
    while i < len(kinds):
        if i + 1 < len(kinds) and rng.random() < 0.3:
            a, b = kinds[i], kinds[i + 1]
            ta = rng.choice(FACTS[a]["state_" + pool]).format(x=values[a])
            tb = rng.choice(FACTS[b]["state_" + pool]).format(x=values[b])
            say(wrap(rng, ta + " " + tb, split), rng.choice(["Okay, noted.", "Got it, I will remember both.",
                                                             "Thanks, I will remember that."]))
            i += 2
        else:
            k = kinds[i]
            t = rng.choice(FACTS[k]["state_" + pool]).format(x=values[k])
            say(wrap(rng, t, split), rng.choice(FACTS[k]["ack"]).format(x=values[k]))
            i += 1
    # 2. unrelated tasks in between
    for _ in range(rng.randint(1, 4)):
        q, a = rng.choice(TASKS)(rng, pool)
        say(wrap(rng, q, split) if rng.random() < 0.3 else q, a)
    # 3. ask about the facts (in random order), with tasks interleaved
    order = kinds[:]
    rng.shuffle(order)
    for k in order:
        q = rng.choice(FACTS[k]["ask_" + pool])
        checks.append({"turn": len(msgs), "expect": values[k], "kind": k})
        say(wrap(rng, q, split), rng.choice(FACTS[k]["answer"]).format(x=values[k]))
        if rng.random() < 0.3:
            q, a = rng.choice(TASKS)(rng, pool)
            say(q, a)
    # sometimes ask a question again later (repeated recall)
    if rng.random() < 0.2:
        k = rng.choice(kinds)
        checks.append({"turn": len(msgs), "expect": values[k], "kind": k})
        say(rng.choice(FACTS[k]["ask_" + pool]), rng.choice(FACTS[k]["answer"]).format(x=values[k]))
    return msgs, checks


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", choices=["train", "heldout"], required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with open(args.out, "w") as f:
        for _ in range(args.count):
            msgs, checks = conversation(rng, args.split)
            f.write(json.dumps({"messages": msgs, "checks": checks}) + "\n")


if __name__ == "__main__":
    main()
