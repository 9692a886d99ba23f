"""Pools for gen_data.py's experimental options (--wide, --grammar, --positions): more real
values and composed frames. Raw lists; gen_data.py drops whatever a held-out pool holds."""


def words(s):
    return s.split()


WIDE_NAMES = words("""Aarav Abebe Adaeze Adriana Agnieszka Ahmed Aiko Akira Alejandro Aleksander
Alessia Anders Andrzej Anika Antoine Arjun Astrid Atticus Ayesha Baptiste Beatriz Benedikt Birgit Bongani
Bronwyn Caoimhe Carmen Catalina Cedric Chiara Chinonso Ciaran Cormac Dagny Dariusz Deepika Desmond Dorota
Eamon Efua Eirik Eleni Emeka Enrique Eskil Fatima Federico Fernanda Folasade Francesca Freya Gaurav Gideon
Giovanni Gunnar Gustavo Hakon Halima Haruto Heike Hemi Hilde Hoang Ibrahim Ilse Ingrid Isolde Itzel Jadwiga
Jaroslav Javier Jovana Juhani Kalani Kaveh Kemal Kirsi Kofi Kristof Lakshmi Ludovic Luana Lucjan Mahmoud
Malgorzata Mariana Matthias Mei Milos Mirela Moana Nadira Naveen Niamh Nikolai Nobuko Oluwaseun Osvaldo
Padraig Paloma Pawel Petra Radek Rafaela Ragnhild Ramona Reinhard Rosalind Ruairi Rukmini Saoirse Seamus
Sergei Shirin Sigrid Sinead Soren Stanislav Sunniva Tamar Tatiana Teodora Thiago Tiago Ulrich Valentina
Vasilis Wanjiru Wiremu Xochitl Yaw Yusra Zainab Zdenek Zofia Zuzana Bartosz Cosmin Dragos Emilia Fionnuala
Grzegorz Henrik Ioana Janusz Katarzyna Ladislav Mirko Nwachukwu Oddny Przemyslaw Radhika Szymon Tuomas""")
WIDE_CITIES = words("""Seville Granada Malaga Porto Braga Coimbra Faro Nantes Lille Toulouse Rennes
Grenoble Strasbourg Dijon Cologne Dresden Leipzig Bremen Hanover Nuremberg Stuttgart Freiburg Graz Linz
Innsbruck Basel Lausanne Lucerne Bern Ghent Bruges Liege Rotterdam Groningen Eindhoven Maastricht Malmo
Uppsala Gothenburg Odense Aalborg Stavanger Tromso Oulu Turku Espoo Tartu Kaunas Lodz Poznan Wroclaw Lublin
Brno Ostrava Kosice Debrecen Szeged Cluj Timisoara Iasi Varna Plovdiv Sofia Skopje Tirana Podgorica Sarajevo
Zagreb Split Belgrade Novi Chisinau Odesa Lviv Kharkiv Minsk Baku Almaty Tashkent Samarkand Bishkek Tehran
Isfahan Shiraz Baghdad Basra Amman Beirut Damascus Jerusalem Haifa Riyadh Jeddah Doha Muscat Karachi Lahore
Dhaka Chennai Kolkata Bangalore Hyderabad Pune Jaipur Colombo Yangon Vientiane Phnom Penh Saigon Shenzhen
Chengdu Wuhan Xian Harbin Busan Incheon Sapporo Nagoya Fukuoka Kobe Taipei Kaohsiung Cebu Davao Surabaya
Bandung Medan Kuching Penang Darwin Hobart Brisbane Cairns Christchurch Dunedin Suva Apia Honolulu Anchorage
Calgary Edmonton Halifax Ottawa Quebec Regina Portland Tucson Memphis Nashville Atlanta Orlando Detroit
Cleveland Pittsburgh Baltimore Richmond Omaha Tulsa Monterrey Tijuana Puebla Oaxaca Merida Managua Leon
Panama Caracas Maracaibo Medellin Cali Guayaquil Cusco Arequipa Sucre Asuncion Rosario Cordoba Mendoza
Salvador Recife Fortaleza Manaus Curitiba Dakar Bamako Accra Kumasi Abuja Kano Douala Kinshasa Luanda
Lusaka Harare Maputo Durban Soweto Windhoek Gaborone Kampala Kigali Addis Khartoum Tunis Algiers Oran Rabat
Fez Tangier Alexandria Luxor Aswan""")
WIDE_PETS = words("""Pippin Archie Bailey Bella Bonnie Bruno Caramel Charlie Chester Cinnamon Clover
Crumble Dexter Dino Domino Dottie Duke Ember Felix Fig Flash Frodo Gnocchi Goose Gus Hazel Honey Hunter Indie
Jasper Jelly Kaiser Lady Latte Lulu Mango Maple Max Meatball Mocha Monty Moose Murphy Nacho Nemo Nibbles Ollie
Paprika Pebbles Penny Pesto Pip Poppy Pudding Quincy Rascal Remy Ripley Rufus Sage Scout Sherlock Skittles
Smudge Sushi Taco Tinkerbell Toffee Trixie Tux Waldo Wiggles Yoda Zeus Ziggystardust""")
WIDE_ITEMS = words("""bananas cherries peaches plums apricots figs dates raisins walnuts almonds
peanuts cashews lentils chickpeas noodles spaghetti cereal granola muffins bagels croissants tortillas
crisps biscuits cookies chocolate sweets popcorn ketchup mustard mayonnaise pickles olives garlic ginger
basil parsley mint pepper paprika nutmeg oregano broccoli cabbage lettuce spinach celery cucumbers courgettes
pumpkins radishes beetroot leeks mushrooms peas corn sausages bacon ham chicken salmon tuna prawns mussels
tofu cream custard icecream lemonade cola water wine beer cider sponges bleach detergent tissues napkins
plasters bandages aspirin vitamins razors combs brushes toothbrushes deodorant lotion sunscreen lipstick
mascara perfume shirts trousers jeans skirts dresses jackets coats scarves gloves mittens boots sandals
slippers pyjamas belts ties socket plugs cables chargers headphones speakers pencils crayons markers erasers
rulers scissors staples folders binders calculators stickers magazines newspapers postcards balloons
ribbons wrapping twine string buckets mops brooms dustpans hammers screws bolts drills saws ladders
paint brushes rollers hoses rakes shovels seeds fertiliser flowerpots soil bulbs tulips roses daisies
lilies candlesticks vases mirrors pillows blankets sheets curtains rugs mats baskets jars bottles lids
kettles teapots mugs bowls saucers glasses knives whisks ladles sieves pans pots trays foil clingfilm
batteries fuses torches lanterns matchsticks firewood charcoal""")
COUNTRIES_WIDE = words("""Germany Italy Poland Greece Turkey Iran Iraq China Korea Thailand Laos
Cambodia Malaysia Indonesia Philippines Australia Mexico Cuba Colombia Ecuador Argentina Uruguay Paraguay
Venezuela Nigeria Senegal Mali Morocco Algeria Tunisia Libya Sudan Ethiopia Somalia Uganda Tanzania Zambia
Angola Namibia Botswana Zimbabwe Mozambique Madagascar Sweden Denmark Iceland Ireland Scotland Wales
Portugal Belgium Netherlands Austria Switzerland Hungary Romania Bulgaria Serbia Croatia Slovenia Slovakia
Czechia Ukraine Belarus Lithuania Latvia Estonia Georgia Armenia Azerbaijan Kazakhstan Uzbekistan Nepal
Bhutan Bangladesh Pakistan Afghanistan Israel Jordan Lebanon Syria Yemen Oman Qatar Kuwait Singapore
Myanmar Taiwan Fiji Samoa Jamaica Haiti Guatemala Honduras Nicaragua Panama""")
WIDE_WORLD = ["What is {p} famous for?", "How big is {p}?", "Who is the mayor of {p}?", "When was {p} founded?",
              "What is the weather like in {p}?", "How far is {p} from {q}?", "Is {p} a nice place to visit?",
              "What should I see in {p}?", "How many people live in {p}?", "What is the best food in {p}?",
              "Which country is {p} in?", "What language do people speak in {p}?", "Who founded {p}?",
              "What is the biggest lake in {c}?", "What do people eat in {c}?", "Who rules {c}?",
              "What is the oldest city in {c}?", "What sport is popular in {c}?", "How big is {c}?"]
# Third-person chatter with real values, answered "I see." (they are not facts about the user).
WIDE_CHATTER = ["My friend {n} called me {w}.", "I met {n} {w}.", "{n} is my neighbour.", "My boss {n} was late {w}.",
                "I visited {p} {w}.", "{p} is lovely in spring.", "My cousin lives in {p}.", "{n} moved to {p} {w}.",
                "My sister has a dog called {a}.", "My friend's cat {a} is funny.", "The shop had no {i} {w}.",
                "{n} likes the colour {k}.", "I saw a film set in {p}.", "My friend {n} bought {i} {w}."]
# More ways to ask (--augment), none of the held-out ones.
WIDE_NP_LEADS = ["Remind me: {o}?", "What about {o}?", "Any chance you remember {o}?", "Do you recall {o}?",
                 "Tell me {o} once more.", "I wonder, what is {o}?", "So what is {o}?", "Now, {o}?",
                 "What did I say {o} was?", "Can you give me {o}?"]
WIDE_WH_LEADS = ["Do you recall {o}?", "Remind me again {o}.", "Can you say {o}?", "Tell me once more {o}.",
                 "I forgot {o}. Do you know?", "Do you have any idea {o}?"]

# --ask-frames: questions composed from a lead, the noun phrase naming the fact and a tail, so the
# noun phrase rather than the sentence around it decides what is asked.
ASK_LEADS = ["", "I want ", "give me ", "what about ", "remind me of ", "tell me ", "I'd like ", "now, ", "so, ",
             "and ", "okay: ", "a question about ", "just checking ", "help me with ", "I'm asking about ",
             "back to ", "I forgot ", "let's see, ", "I'm trying to remember ", "say ", "what was ", "what is ",
             "do you still have ", "can I get ", "I'd like to hear ", "hmm, "]
ASK_TAILS = ["?", ", what is it?", ", what was it again?", ", do you remember?", ", please?", " - any idea?",
             ". Can you say it?", ", remind me?", "? I forgot.", ", if you know?", " again?", ", still know it?",
             ". What is it?", " - what did I say?", ", please.", ". What was it?", ", tell me?", "? Go on."]


# --grammar
STATE_NP = {
    "name": (["my name", "my first name", "my own name", "the name I use", "my nickname", "the name I go by"], []),
    "number": (["my favourite number", "my lucky number", "my number", "the number I like", "my special number",
                "my number for today"], []),
    "city": (["my city", "my home city", "my town", "the city I live in", "my place of living", "my current city"],
             []),
    "colour": (["my favourite colour", "my favorite color", "the colour I like best", "my colour",
                "the colour I love", "my top colour"], []),
    "pet": (["my pet's name", "my dog's name", "my cat's name", "the name of my pet", "our dog's name",
             "my rabbit's name"], []),
    "list": (["my shopping list", "my list", "my list for the shop", "my grocery list"],
             ["the things I need", "my groceries", "the items I want", "the things to buy"]),
}
STATE_PATTERNS = ["{np} {is} {x}", "{np} {is} {x}, by the way", "{np}: {x}", "for the record, {np} {is} {x}",
                  "you should know that {np} {is} {x}", "just so you know, {np} {is} {x}", "{np} happens to be {x}",
                  "{np} {is} actually {x}", "note that {np} {is} {x}", "remember that {np} {is} {x}",
                  "let me tell you {np}: {x}", "here is {np}: {x}", "so {np} {is} {x}", "{np} = {x}",
                  "fyi {np} {is} {x}", "I'll tell you {np}, it is {x}", "{np}? It is {x}"]
STATE_VERBS = {
    "name": ["I am called {x}", "I go by {x}", "I answer to {x}", "I was named {x} at birth", "most people know me as {x}",
             "my friends know me as {x}", "my family calls me {x}", "everybody knows me as {x}",
             "I was given the name {x}", "hello, {x} speaking", "{x} is what people call me", "the name I use is {x}",
             "it is me, {x}", "{x} is my name", "I'm {x} by the way", "you are talking to {x}"],
    "number": ["the number {x} is special to me", "I always go for {x}", "I like {x} best of all numbers",
               "keep {x} for me", "think of the number {x}", "my code word is the number {x}", "hold {x} for me",
               "{x} is a number I like", "the number for me is {x}", "don't forget the number {x}"],
    "city": ["I stay in {x}", "my address is in {x}", "I've been living in {x}", "home is {x}",
             "I was born in {x} and live there", "my place is in {x}", "I rent a room in {x}",
             "my family and I live in {x}", "we are in {x}", "I now call {x} home", "I live over in {x}",
             "I live right in {x}", "{x} is my home"],
    "colour": ["I like {x} best", "{x} is the best colour", "my colour of choice is {x}", "I always wear {x}",
               "I love anything {x}", "the colour {x} makes me happy", "give me {x} any day", "{x}, that is my colour",
               "nothing beats {x}", "my clothes are all {x}", "I paint everything {x}"],
    "pet": ["I've got a dog called {x}", "our kitten is {x}", "my goldfish is named {x}", "my tortoise is called {x}",
            "we got a puppy and called it {x}", "my little dog is {x}", "we have a pet, {x}", "my pet answers to {x}",
            "the dog's name is {x}", "at home we have a cat, {x}", "my pony is called {x}", "{x} is my dog"],
    "list": ["I must get {x}", "I still need {x}", "we are out of {x}", "I've run out of {x}", "don't let me forget {x}",
             "grab {x} for me", "at the shop I need {x}", "we need to get {x}", "get me {x}", "to buy: {x}",
             "buy {x} today", "I'm going shopping for {x}", "I need {x} from the store", "we should buy {x}",
             "the list says {x}", "need: {x}"],
}
ASK_GRAMMAR = {
    "name": ["Who am I again?", "Who is this?", "Do you know my name?", "Who are you chatting with?",
             "What do you call me?", "What is the name I use?", "Who said hello to you?"],
    "number": ["What is my number again?", "Which number was it?", "What number did I give?"],
    "city": ["Where did I say I live?", "Which city is my home?", "Where is home for me?"],
    "colour": ["What colour did I tell you?", "Which colour is mine?", "What's my colour?"],
    "pet": ["What did I call my pet?", "What is the pet called?", "Who is my pet?"],
    "list": ["What did I need to buy?", "What was on the list?", "What should I get at the shop?"],
}
PLACE_SUFFIXES = ["ia", "land", "stan", "ria", "ova", ""]
# --positions: the value first in the sentence, and words after it (a stated value ends where
# the value ends, not where the sentence does).
STATE_VALUE_FIRST = ["{x} {is} {np}", "{x}, that {is} {np}", "{x} - that's {np}", "{x} {is} {np}, by the way",
                     "{x}! That {is} {np}", "{x} would be {np}"]
TRAILERS = [" now", " these days", " at the moment", " for now", " as you know", " since last year", " by the way",
            " of course", " I think", " if you must know", " as well", " for a while now", " right now", " lately",
            " this year", " for years", " to be honest", " if that helps", " most of the time", " still",
            ", which is nice", ", you see", " and that is that", ", remember"]
LIST_TRAILERS = [" for the weekend", " for dinner", " from the shop", " for tomorrow", ", please", " before Friday",
                 " for the party", " from the market", " today", " this week"]
# --variety: stating frames built around what marks each kind of fact in ordinary speech (a
# species word for a pet, who gave a name, a colour word alone, a place verb), value first or
# last, with words after the value; more openers and closers around a stated fact.
SPECIES = words("""dog cat puppy kitten hamster rabbit bunny parrot budgie canary goldfish tortoise turtle
ferret pony horse lizard gecko snake iguana mouse rat chinchilla hedgehog cockatoo goat pig duck hen donkey""")
PET_SPECIES_FRAMES = ["I have a {a} called {x}", "I just got a {a} and called it {x}", "we adopted a {a} named {x}",
                      "{x} is the name of our {a}", "{x} is my {a}", "my {a}'s name is {x}", "my {a} is called {x}",
                      "our {a} goes by {x}", "there is a {a} at home called {x}", "I look after a {a} named {x}",
                      "my {a} {x} is lovely", "my new {a} is {x}", "we named our {a} {x}",
                      "I got a {a} for my birthday and named it {x}", "the {a} I own is called {x}",
                      "{x} is what I call my {a}", "I own a {a}, {x}", "{x}, my {a}, is sleeping",
                      "we have a {a} and its name is {x}", "I called my {a} {x}", "last year I bought a {a} called {x}"]
NAME_GIVERS = ["my friends", "my grandparents", "my teachers", "people", "my colleagues", "most people", "my cousins",
               "my classmates", "my neighbours", "my sisters", "my brothers", "folks at home", "my coworkers"]
NAME_GIVER_FRAMES = ["{x} is what {w} call me", "{w} call me {x}", "{x} is the name {w} gave me",
                     "I was named {x} by {w}", "{w} chose the name {x} for me", "{w} always called me {x}",
                     "{x} is what {w} chose for me", "{w} know me as {x}", "{x}, that is what {w} call me"]
NAME_FRAMES = ["{x} is me", "I'm {x} and I'm new here", "I'm {x}, hello", "this is {x} writing", "{x} speaking",
               "{x} is my first name", "my name, by the way, is {x}", "I go by {x} these days", "{x} here, hi",
               "I introduce myself as {x}", "I'm called {x} at home", "you're chatting with {x}"]
COLOUR_FRAMES = ["{x} makes me happy", "anything {x} is nice", "I love {x}", "I always pick {x}", "I wear a lot of {x}",
                 "everything I own is {x}", "I dress in {x} most days", "my room is painted {x}", "{x} suits me best",
                 "I buy my clothes in {x}", "I like {x} things", "{x} is my thing",
                 "if I had to choose a colour, I'd take {x}", "nothing is as nice as {x}", "I'm a fan of {x}",
                 "my car is {x} because I love that colour", "I prefer {x} to any other colour",
                 "I painted my door {x}", "{x} always cheers me up", "I go for {x} whenever I can"]
CITY_FRAMES = ["{x} is where I live", "{x} is where I grew up", "I was raised in {x}",
               "home for me is {x}", "I've settled in {x}", "I spend my life in {x}",
               "{x} is where my flat is", "my flat is in {x}", "I moved to {x} a while ago", "I'm a local of {x}",
               "I was born and raised in {x}", "I call {x} my home", "{x} is the city I live in",
               "I've lived in {x} all my life", "my house is in {x}", "we live in {x} now", "{x}, that's my city"]
LIST_FRAMES = ["{x} are on my list", "{x} are what I need to get", "I'll pick up {x} on the way home",
               "at the shop I'll get {x}", "I'm going to buy {x}", "{x}, that's my shopping", "I need to grab {x}",
               "tomorrow I'll buy {x}", "my basket needs {x}", "I'm out of {x}, so I need to buy them",
               "{x} need buying", "I must remember to buy {x}", "I'm shopping for {x} later", "the shop: {x}"]
NUMBER_FRAMES = ["{x} is the number I like", "if I had to choose a number, I'd take {x}", "{x} has always been my number",
                 "I like {x} more than any other number", "{x} is my number", "I'm fond of the number {x}",
                 "my number has always been {x}"]
VARIETY_TRAILERS = [" mostly", " usually", " anyway", " though", " too", " nowadays", " for ages", " as it happens",
                    " in fact", " basically", " honestly", " if you ask me", " believe it or not", " really",
                    " at home", " for real", " all the time", " every day", " since I was small", " no doubt",
                    " for sure", " then", " and so on", " obviously", " just so you know", ", I guess",
                    ", you know", ", ok", ", thanks", ", if that matters", " and I like it", " these past years"]
VARIETY_OPENERS = ["Quick one. ", "Right then. ", "Fun fact: ", "Good news. ", "Small thing. ", "Listen up. ",
                   "Oh well. ", "Anyway. ", "Here goes. ", "Real quick. ", "Guess what? ", "You know what? ",
                   "Let me see. ", "Oh, right. ", "Sorry. ", "Also. ", "First thing. ", "Hello again. ", "Look, ",
                   "So yeah, ", "Honestly, ", "Um. ", "Er, ", "Ah, ", "Well then. ", "By the way. "]
VARIETY_CLOSERS = [" Thanks heaps.", " Thanks very much.", " Many thanks.", " Thanks a bunch.", " Appreciated.",
                   " Thank you kindly.", " If you don't mind.", " If that's ok.", " If possible.", " Got that?",
                   " Don't forget!", " Ok, thanks.", " Thanks, bye.", " Just saying.", " Keep it safe."]

# More ways to state and ask about each fact (--augment), none from the held-out pools.
FACT_EXTRA = {
    "name": dict(state=["I am {x}", "Just call me {x}", "It's {x} here", "Hello, I am {x}", "Folks call me {x}",
                        "My name happens to be {x}", "Name's {x}", "I am known as {x}", "Please call me {x}"],
                 np=["my own name", "the name I have", "the name you call me", "the name I said"],
                 wh=["who I said I was", "what name I told you", "what people call me", "what my name is again"],
                 ask=["Do you know who I am?", "Who did I say I was?", "What did I say my name was?",
                      "What name did I tell you?"]),
    "number": dict(state=["Number: {x}", "Remember this number: {x}", "My code is {x}", "Memorise the number {x}",
                          "The number I want you to keep is {x}", "Write down {x} for me", "Save the number {x}",
                          "My number for today is {x}"],
                   np=["my own number", "that number", "the number I gave", "the number from before"],
                   wh=["what number I said", "which number I told you", "what my lucky number is"],
                   ask=["Which number did I tell you?", "What number was it?", "What is the number I told you?"]),
    "city": dict(state=["I'm living in {x}", "I stay in {x}", "Currently I live in {x}", "My house is in {x}",
                        "City: {x}", "I work and live in {x}", "I'm settled in {x}", "We live in {x}"],
                 np=["the city where I live", "the town I live in", "my current city", "my home"],
                 wh=["where I stay", "what town I live in", "where my house is", "what my city is"],
                 ask=["Where do I stay?", "Which town do I live in?", "Where is my house?", "Where am I living?"]),
    "colour": dict(state=["My favourite shade is {x}", "I adore the colour {x}", "My top colour is {x}",
                          "The color I love is {x}", "Colour: {x}", "{x} is the colour I like best"],
                   np=["my best colour", "the colour I love", "my top colour", "the color I like best"],
                   wh=["which colour I love most", "what my top colour is", "which color I like best"],
                   ask=["Which colour do I love?", "What colour did I say I like?", "What is my top colour?"]),
    "pet": dict(state=["My pet dog is {x}", "Our cat is called {x}", "I have a dog named {x}", "Pet: {x}",
                       "My fish is called {x}", "My bird is named {x}", "Our pet's name is {x}",
                       "I have a cat named {x}"],
                np=["our pet's name", "the pet's name", "the name of our dog", "my dog"],
                wh=["what our pet is called", "what my dog is called", "what we named our pet"],
                ask=["What is our pet called?", "What did we call our pet?", "What's the name of my cat?"]),
    "list": dict(state=["I should buy {x}", "Groceries: {x}", "I want to buy {x}", "We need {x}", "My list has {x}",
                        "Buy list: {x}", "I need to get {x}", "Please note my list: {x}"],
                 np=["my groceries", "the shopping list", "my list of things", "the things on my list"],
                 wh=["what I should buy", "what is on the list", "what I want to buy", "what we need"],
                 ask=["What should I buy?", "What was on my list?", "What do I need?"]),
}
# Stating frames with words after the value (--distractors), so the value's end is learned
# from the value rather than from the end of the sentence.
FACT_TRAILING = {
    "name": ["My name is {x} and I am new here", "I'm {x}, nice to meet you", "Call me {x} from now on"],
    "number": ["{x} is my favourite number", "Remember {x} as my number", "The number {x} is mine"],
    "city": ["I live in {x} with my family", "I moved to {x} last year", "{x} is where I live"],
    "colour": ["I like {x} a lot", "{x} is the colour I love", "My favourite colour is {x} these days"],
    "pet": ["My dog {x} is very old", "Our cat {x} sleeps all day", "I have a pet called {x} at home"],
    "list": ["I need {x} from the shop", "Buy {x} for me", "My list has {x} on it"],
}

# --arith-frames: sums composed from a lead, the expression and a tail, so a question is read by
# its numbers and operator rather than by the sentence around them.
ARITH_LEADS = ["", "what is ", "what's ", "how much is ", "tell me ", "give me ", "compute ", "calculate ", "solve ",
               "find ", "do ", "figure out ", "could you do ", "what would be ", "what do you get for ",
               "help me with ", "maths question: ", "math: ", "here is a sum: ", "can you tell me ", "and ",
               "next one: ", "try this: ", "homework: ", "what comes out of ", "the result of ", "one more: "]
ARITH_EXPRS = {"add": ["{a} plus {b}", "{a} + {b}", "{a}+{b}", "{a} and {b} added together", "the sum of {a} and {b}",
                       "{a} plus {b} in total", "{a} added to {b}"],
               "sub": ["{a} minus {b}", "{a} - {b}", "{a}-{b}", "{a} take away {b}", "{b} subtracted from {a}",
                       "{a} less {b}", "{a} with {b} taken away"]}
ARITH_TAILS = ["?", ".", "", " please?", ", please.", " for me?", "? Thanks.", ", what's the answer?", " - what do you get?",
               ", how much is that?", " = ?", " equals?", ", quickly?", "? Just the number.", "? I'm not sure."]


def frames_from_parts(leads, middles, tails):
    """Every lead + middle + tail (--arith-frames, --ask-frames), first letter capitalised."""
    frames = [lead + m + tail for lead in leads for m in middles for tail in tails]
    return [f[0].upper() + f[1:] for f in frames]


def variety_frames(kind):
    """--variety's stating frames of one kind of fact."""
    if kind == "pet":
        return [f.format(a=a, x="{x}") for f in PET_SPECIES_FRAMES for a in SPECIES]
    if kind == "name":
        return [f.format(w=w, x="{x}") for f in NAME_GIVER_FRAMES for w in NAME_GIVERS] + NAME_FRAMES
    return {"colour": COLOUR_FRAMES, "city": CITY_FRAMES, "list": LIST_FRAMES, "number": NUMBER_FRAMES}[kind]
